"""A stand-in for the AnsibleModule the runner and the resources use, for unit tests: exit_json and
fail_json raise Exited with the result, the sessions are placeholders the fake client layers ignore."""


class Exited(SystemExit):
    """exit_json or fail_json was called; ``result`` is what the module returned.

    A SystemExit, as AnsibleModule's own exit (``sys.exit``) is: a module's ``except Exception`` cannot catch
    it, so a test sees a module that goes on after it has exited, or swallows its own exit, fail."""

    def __init__(self, result):
        super(Exited, self).__init__(1 if (result or {}).get("failed") else 0)
        self.result = result


class FakeModule:
    """``params``, check and diff mode, the warnings given; ``partial`` left unset when None (a module
    without one); ``warnings_expected=False`` makes any warning fail the test."""

    def __init__(self, params=None, check_mode=False, diff=False, partial=None, warnings_expected=True):
        self.params = params or {}
        self.check_mode = check_mode
        self._diff = diff
        self.warnings = []
        self.warnings_expected = warnings_expected
        if partial is not None:
            self.partial = partial

    def client(self):
        return "soap session"

    def rest_client(self):
        return "rest session"

    def api_version(self):
        """No version: the fake client layers answer with their own."""
        return None

    def warn(self, text):
        if not self.warnings_expected:
            raise AssertionError("no warning expected: %s" % text)
        self.warnings.append(text)

    def exit_json(self, **result):
        raise Exited(result)

    def fail_json(self, msg, **result):
        result.update(failed=True, msg=msg)
        raise Exited(result)
