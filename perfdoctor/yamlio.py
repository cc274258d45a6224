"""YAML/JSON loading that refuses duplicate keys (PyYAML silently keeps the last one)."""
import json
from pathlib import Path

import yaml

from perfdoctor.errors import InputError


class StrictLoader(yaml.SafeLoader):
    """A SafeLoader that raises on a duplicate mapping key."""


class FastStrictLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """The same on libyaml's parser (about 7x faster); errors are re-read with StrictLoader for its messages."""


def _construct_mapping(loader, node, deep=False):
    loader.flatten_mapping(node)   # YAML merge keys (<<: *anchor) first
    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if not isinstance(key, (str, int, float, bool)) and key is not None:
            raise yaml.constructor.ConstructorError(
                None, None, "a mapping key must be a plain value", key_node.start_mark)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node, deep)


for _loader in (StrictLoader, FastStrictLoader):
    _loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def load_text(text: str, where: str):
    """Parse YAML (a superset of JSON) text; errors name `where` and the line."""
    try:
        return yaml.load(text, Loader=FastStrictLoader)
    except (yaml.YAMLError, ValueError):
        pass   # read it again with the pure-Python parser, whose line numbers and messages are the ones we report
    try:
        return yaml.load(text, Loader=StrictLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = f"line {mark.line + 1}" if mark else "parse"
        raise InputError(where, line, exc.problem or str(exc)) from None
    except yaml.reader.ReaderError as exc:
        raise InputError(where, f"byte {exc.position}", f"not text: unacceptable character #x{exc.character:04x}") from None
    except (yaml.YAMLError, ValueError) as exc:
        raise InputError(where, "", f"not valid YAML or JSON: {' '.join(str(exc).split())}") from None


def load_file(path, shown: str | None = None):
    """Load a YAML or JSON file; `shown` is the path as the user typed it."""
    path = Path(path)
    where = shown or str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(where, "", "file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(where, "", f"cannot read: {exc}") from None
    if path.suffix == ".json":
        try:
            return json.loads(text, object_pairs_hook=_no_duplicates(where))
        except json.JSONDecodeError as exc:
            raise InputError(where, f"line {exc.lineno}", exc.msg) from None
    return load_text(text, where)


def _no_duplicates(where):
    def hook(pairs):
        out = {}
        for key, value in pairs:
            if key in out:
                raise InputError(where, key, "duplicate key")
            out[key] = value
        return out
    return hook
