"""Parsing the vGPU software license state of `nvidia-smi -q` from realistic samples (pure/_nvidia_smi)."""
import datetime
from pathlib import Path

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._nvidia_smi import parse, parse_expiry

FIX = Path(__file__).resolve().parents[2] / "modules" / "fixtures" / "nvidia_smi"


def sample(name):
    return (FIX / name).read_text()


def test_licensed():
    r = parse(sample("licensed.txt"))
    assert r["driver_present"] and r["driver_version"] == "550.127.05" and r["licensed"]
    g = r["gpus"][0]
    assert g["pci_bus_id"] == "00000000:02:00.0" and g["product_name"] == "NVIDIA H100XM-80C"
    assert g["licensed_product"] == "NVIDIA Virtual Compute Server"
    assert g["expiry"] == "2027-11-29T23:59:59Z" and not g["expired"]


def test_unlicensed():
    r = parse(sample("unlicensed.txt"))
    assert not r["licensed"] and r["gpus"][0]["license_status"] == "Unlicensed (Restricted)"
    assert r["gpus"][0]["expiry"] is None


def test_expired_against_report_time_and_now():
    r = parse(sample("expired.txt"))
    g = r["gpus"][0]
    assert g["expiry"] == "2026-11-02T08:04:05Z" and g["expired"] and not g["licensed"] and not r["licensed"]
    # the same lease seen before its expiry is valid
    assert parse(sample("expired.txt"), now=datetime.datetime(2026, 11, 1))["licensed"]


def test_no_driver():
    r = parse(sample("no_driver.txt"))
    assert r["driver_present"] is False and not r["licensed"] and "NVIDIA driver" in r["message"]
    assert parse("")["driver_present"] is False


def test_two_gpus_one_unlicensed():
    r = parse(sample("two_gpus_one_unlicensed.txt"))
    assert [g["licensed"] for g in r["gpus"]] == [True, False] and not r["licensed"]


def test_parse_expiry_unpadded():
    assert parse_expiry("Licensed (Expiry: 2024-6-9 2:4:6 GMT)") == datetime.datetime(2024, 6, 9, 2, 4, 6)
