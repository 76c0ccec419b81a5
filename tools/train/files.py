"""JSON files and folder sizes for the training tools, without torch (tools/select_default_models.py runs
where torch is missing; tools/train/common.py re-exports these)."""
import json
import os


def write_json(path, obj, compact=False):
    """Indented for files people read; compact (one line) for the long id lists of the regression tests' sets,
    which count against the shipped models' 40 MB."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(obj, f, **({"separators": (",", ":")} if compact else {"indent": 2}))
        f.write("\n")


def read_json(path):
    with open(path) as f:
        return json.load(f)


def dir_bytes(path):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)
