"""JSON files and folder sizes for the training tools, without torch (tools/select_default_models.py runs
where torch is missing; tools/train/common.py re-exports these)."""
import json
import os


def write_json(path, obj):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(obj, f, indent=2)
        f.write("\n")


def read_json(path):
    with open(path) as f:
        return json.load(f)


def dir_bytes(path):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)
