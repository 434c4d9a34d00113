"""The JSON Schema for config files, generated from the model so editors and validation never disagree."""

from __future__ import annotations

import json

from testreuse.model import ConfigFile


def config_schema_text() -> str:
    """Deterministic text (sorted keys, trailing newline) so the committed copy can be compared byte for byte."""
    schema = ConfigFile.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"
