"""What a module's documentation promises, for the main() tests under tests/unit/plugins/modules: the
keys its RETURN block documents (by when they are returned), and whether a result shows a secret it was
given (an option marked ``no_log``)."""
import json

import yaml


def documented(module, *when):
    """The RETURN keys of ``module`` whose ``returned`` is one of ``when`` (every key without ``when``)."""
    returns = yaml.safe_load(module.RETURN) or {}
    return set(key for key, doc in returns.items() if not when or doc.get("returned") in when)


def missing_keys(result, module, *when):
    """The documented RETURN keys (returned ``when``) that ``result`` lacks, sorted: [] when it has them all."""
    return sorted(documented(module, *when) - set(result))


def shows(result, *secrets):
    """The secrets that appear anywhere in ``result`` (its JSON form: keys, values, messages), sorted."""
    text = json.dumps(result, sort_keys=True, default=str)
    return sorted(s for s in secrets if s in text)
