"""What a module's documentation promises, for the main() unit tests: the RETURN keys it returns always and
the options it marks ``no_log``, read from the module itself (so a test follows the docs as they change)."""
import yaml


def always_returned(module):
    """The RETURN keys documented as ``returned: always``."""
    doc = yaml.safe_load(module.RETURN) or {}
    return sorted(key for key, entry in doc.items() if (entry or {}).get("returned") == "always")


def missing_keys(module, result):
    """The ``returned: always`` keys that ``result`` lacks (empty when the module keeps its RETURN)."""
    return [key for key in always_returned(module) if key not in result]


def secret_options(argument_spec):
    """The options of ``argument_spec`` marked ``no_log``."""
    return sorted(name for name, spec in argument_spec.items() if spec.get("no_log"))


def leaked(result, secrets):
    """The secret values (strings) that appear anywhere in ``result``, as its text."""
    text = repr(result)
    return [value for value in secrets if value and value in text]
