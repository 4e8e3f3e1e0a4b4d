"""The execution environment files are accepted by ansible-builder."""
import pathlib
import shutil
import subprocess
import sys

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[3]


def test_collection_ee_metadata_points_at_real_files():
    meta = yaml.safe_load((ROOT / "meta" / "execution-environment.yml").read_text())
    assert meta["version"] == 1
    for key in ("python", "system"):
        assert (ROOT / meta["dependencies"][key]).is_file()


def test_ansible_builder_create_accepts_example(tmp_path):
    builder = pathlib.Path(sys.executable).parent / "ansible-builder"
    assert builder.exists(), "ansible-builder is missing from the venv (requirements-dev.txt)"
    work = tmp_path / "examples"
    work.mkdir()
    shutil.copy(ROOT / "examples" / "execution-environment.yml", work)
    (tmp_path / "gpupool-vcf-0.1.0.tar.gz").write_bytes(b"")  # create only copies it
    proc = subprocess.run([str(builder), "create", "-f", str(work / "execution-environment.yml"),
                           "-c", str(tmp_path / "context")], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # Containerfile for podman, Dockerfile when docker is the runtime found
    built = [n for n in ("Containerfile", "Dockerfile") if (tmp_path / "context" / n).is_file()]
    assert built, proc.stdout
    text = (tmp_path / "context" / built[0]).read_text()
    assert "ansible-galaxy collection install" in text
