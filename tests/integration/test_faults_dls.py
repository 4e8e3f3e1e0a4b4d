"""Faults of the DLS appliance during a real dls_client_token run (the contract double's fault
switches, tests/sim/dls/README.md): each run either survives and converges, or fails within its
request timeout naming the appliance and the request, with the token file as it was; a plain
rerun after the fault is cleared converges."""
import hashlib
import json
import ssl
import time
import urllib.request
from pathlib import Path

import pytest

from tests.lib.ansible_run import run_module

import dls_double

MODULE = "gpupool.vcf.dls_client_token"
LOGIN = "/auth/v1/login"
ME = "/auth/v1/user/me"
COMPOSE = "/service_instance_manager/v1/service-instance/compose-messenger-token"


def args(dls, dest, **kw):
    a = {"dls_host": dls.host, "port": dls.port, "username": dls_double.USERNAME,
         "password": dls_double.PASSWORD, "dest": str(dest), "ca_file": dls.ca_file, "request_timeout": 2}
    a.update(kw)
    return a


def files(dest):
    """The token and its metadata file, byte for byte (None when absent)."""
    meta = Path(str(dest) + ".meta.json")
    return tuple(p.read_bytes() if p.exists() else None for p in (Path(dest), meta))


def timed(module_args, **kw):
    start = time.monotonic()
    res, run = run_module(MODULE, module_args, **kw)
    return res, run, time.monotonic() - start


def converged(dls, dest, **kw):
    """A plain rerun makes a token that matches its metadata, then a third run has nothing to do."""
    res = run_module(MODULE, args(dls, dest, **kw))[0]
    assert res.get("changed") is True and not res.get("failed"), res
    token = Path(dest).read_bytes().strip()
    meta = json.loads(Path(str(dest) + ".meta.json").read_text())
    assert meta["sha256"] == hashlib.sha256(token).hexdigest()
    kw.pop("force", None)
    again = run_module(MODULE, args(dls, dest, **kw))[0]
    assert again.get("changed") is False and again["reason"] == "valid", again
    return res


def test_appliance_down_fails_leaves_old_token_and_rerun_converges(dls, tmp_path):
    dest = tmp_path / "client.tok"
    assert run_module(MODULE, args(dls, dest))[0]["changed"] is True
    before = files(dest)
    dls.down()  # fault: the appliance is down when the run starts (connection refused)
    res, run, took = timed(args(dls, dest, force=True))
    assert res.get("failed") and "Traceback" not in json.dumps(res), res
    assert "DLS localhost:%d" % dls.port in res["msg"] and "connection refused (3 attempts)" in res["msg"], res
    assert "POST %s" % LOGIN in res["msg"] and "the token in %s was left as it was" % dest in res["msg"], res
    assert files(dest) == before and took < 30
    assert "Traceback" not in run.stdout
    dls.up()
    converged(dls, dest, force=True)
    assert files(dest)[0] != before[0]


def test_appliance_down_before_the_first_token_writes_nothing(dls, tmp_path):
    dest = tmp_path / "client.tok"
    dls.down()
    res = run_module(MODULE, args(dls, dest))[0]
    assert res.get("failed") and "no token was written" in res["msg"], res
    assert list(tmp_path.iterdir()) == []  # no token, no metadata, no temporary file
    dls.up()
    converged(dls, dest)


def test_two_5xx_answers_are_survived(dls, tmp_path):
    dest = tmp_path / "client.tok"
    dls.fail_next(2, status=503)  # fault: the first two requests of the run (the login) answer 503
    res = run_module(MODULE, args(dls, dest))[0]
    assert res.get("changed") is True and not res.get("failed"), res
    assert [f[:2] for f in dls.state.faulted] == [("POST", LOGIN)] * 2
    assert dls.state.count("POST", LOGIN) == 3 and dls.state.count("POST", COMPOSE) == 1
    converged(dls, dest, force=True)


def test_5xx_through_the_admin_endpoint_on_a_read_is_survived(dls, tmp_path):
    dest = tmp_path / "client.tok"
    ctx = ssl.create_default_context(cafile=dls.ca_file)
    req = urllib.request.Request("https://%s:%d/_sim/faults" % (dls.host, dls.port), method="POST",
                                 data=json.dumps({"fail": 2, "status": 502, "path": "^/auth/v1/user/me$"}).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, context=ctx, timeout=5) as resp:
        assert json.loads(resp.read())["fail"] == 2
    res = run_module(MODULE, args(dls, dest))[0]
    assert res.get("changed") is True, res
    assert dls.state.faulted == [("GET", ME, "502")] * 2 and dls.state.count("GET", ME) == 3


def test_5xx_that_persists_fails_naming_the_request_then_rerun_converges(dls, tmp_path):
    dest = tmp_path / "client.tok"
    dls.fail_next(100, status=503, path="service-instance$")  # fault: the service-instance read, every time
    res, run, took = timed(args(dls, dest))
    assert res.get("failed") and "Traceback" not in run.stdout, res
    assert ("GET /service_instance_manager/v1/service-instance: answered 503 Service temporarily unavailable "
            "(injected fault) (three times)") in res["msg"], res
    assert "no token was written" in res["msg"] and not dest.exists() and took < 30
    dls.clear_faults()
    converged(dls, dest)


def test_5xx_on_the_token_request_is_not_repeated_and_nothing_is_written(dls, tmp_path):
    dest = tmp_path / "client.tok"
    assert run_module(MODULE, args(dls, dest))[0]["changed"] is True
    before = files(dest)
    dls.fail_next(1, status=500, path="compose-messenger-token$")  # fault: at the write (the token request)
    res = run_module(MODULE, args(dls, dest, force=True))[0]
    assert res.get("failed") and "POST %s: answered 500" % COMPOSE in res["msg"], res
    assert dls.state.count("POST", COMPOSE) == 2  # the first run's, and this one: not repeated
    assert files(dest) == before
    converged(dls, dest, force=True)


def test_one_slow_answer_under_the_timeout_is_survived(dls, tmp_path):
    dest = tmp_path / "client.tok"
    dls.slow_next(1, seconds=1, path="license-servers")  # fault: the license server read answers 1 s late
    res, run, took = timed(args(dls, dest, request_timeout=3))
    assert res.get("changed") is True and not res.get("failed") and "Traceback" not in run.stdout, res
    assert took >= 1


def test_appliance_that_stalls_fails_within_the_timeout_then_rerun_converges(dls, tmp_path):
    dest = tmp_path / "client.tok"
    dls.slow_next(100, seconds=60, path="^/auth/v1/user/me$")  # fault: every user/me read stalls
    res, run, took = timed(args(dls, dest, request_timeout=1))
    assert res.get("failed") and "Traceback" not in run.stdout, res
    assert "GET %s: localhost:%d did not answer within 1 s (3 attempts)" % (ME, dls.port) in res["msg"], res
    assert "no token was written" in res["msg"] and not dest.exists()
    # three attempts of 1 s plus backoff (under 2 s) plus ansible-playbook's own start
    assert took < 15, took
    dls.clear_faults()
    converged(dls, dest)


def test_expired_bearer_is_answered_by_one_new_login(dls, tmp_path):
    dest = tmp_path / "client.tok"
    dls.state.expire_next_bearer = 1  # fault: the bearer token of the run's login has already expired
    res = run_module(MODULE, args(dls, dest))[0]
    assert res.get("changed") is True, res
    assert dls.state.count("POST", LOGIN) == 2


def test_bearer_refused_after_the_new_login_fails_clearly(dls, tmp_path):
    dest = tmp_path / "client.tok"
    dls.state.expire_next_bearer = 2  # fault: the new login's token is refused too
    res = run_module(MODULE, args(dls, dest))[0]
    assert res.get("failed") and "401" in res["msg"] and "after a new login" in res["msg"], res
    assert dls.state.count("POST", LOGIN) == 2 and not dest.exists()
    converged(dls, dest)


@pytest.mark.parametrize("value", [0, -3])
def test_request_timeout_must_be_positive(dls, tmp_path, value):
    res = run_module(MODULE, args(dls, tmp_path / "t.tok", request_timeout=value))[0]
    assert res.get("failed") and "request_timeout" in res["msg"], res
    assert dls.state.requests == [] and list(tmp_path.iterdir()) == []
