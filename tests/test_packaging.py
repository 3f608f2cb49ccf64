"""The wheel ships every package: each folder of luminal_fn/ with an __init__.py is listed in
pyproject.toml (it is listed by hand because luminal_fn.kernels maps to the top-level kernels/)."""
import pathlib
import tomllib

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_every_package_is_listed():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "luminal_fn").rglob("__init__.py")}
    missing = found - listed
    assert not missing, f"add these packages to pyproject.toml [tool.setuptools] packages: {sorted(missing)}"
    assert "luminal_fn.kernels" in listed
