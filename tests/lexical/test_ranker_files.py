"""The learned ranker's model file: the shipped one loads, and a file that cannot be used is
one line naming the file and what is wrong with it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slm_rerank.lexical.features import FEATURES
from slm_rerank.lexical.ranker import (
    MAX_MODEL_BYTES,
    MODEL_FORMAT,
    RankerError,
    load_model,
    shipped_model,
)

#: a usable model, which each case below breaks one way
GOOD = {"format": MODEL_FORMAT, "name": "t", "features": ["lexical", "names_file"],
        "mean": [0.5, 0.0], "scale": [0.25, 1.0], "weights": [2.0, 1.0], "bias": 0.0}


def test_the_shipped_model_loads_and_names_only_features_this_version_computes() -> None:
    model = shipped_model()

    assert model.origin == "shipped"
    assert model.name
    assert model.features and set(model.features) <= set(FEATURES)
    assert len(model.weights) == len(model.mean) == len(model.scale) == len(model.features)


def test_a_good_model_file_loads_with_its_path_as_origin(tmp_path: Path) -> None:
    path = tmp_path / "model.json"
    path.write_text(json.dumps(GOOD))

    model = load_model(path)

    assert (model.name, model.features, model.origin) == ("t", ("lexical", "names_file"),
                                                          str(path))


def _write(path: Path, content: object) -> None:
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content if isinstance(content, str) else json.dumps(content))


@pytest.mark.parametrize(("content", "says"), [
    (b'{"format": 1, "name": ', "not valid JSON"),
    (b"\xff\xfe not text", "not valid JSON"),
    ({**GOOD, "format": 99}, "model format 99, this slm-rerank reads format 1"),
    ({**GOOD, "features": ["lexical", "moon_phase"]},
     "features 'moon_phase' are not computed by this slm-rerank"),
    ('{"format": 1, "name": "t", "features": ["lexical"], "mean": [NaN], "scale": [1.0], '
     '"weights": [1.0]}', "'mean' must be a list of 1 finite numbers"),
    ({**GOOD, "weights": [1.0, float("inf")]}, "'weights' must be a list of 2 finite numbers"),
    (b" " * (MAX_MODEL_BYTES + 1), f"over {MAX_MODEL_BYTES} bytes"),
    ([1, 2, 3], "not a ranker model"),
], ids=["corrupt", "not-utf8", "format", "unknown-feature", "nan", "infinite", "too-big",
        "not-an-object"])
def test_an_unusable_model_file_is_one_line_naming_it(tmp_path: Path, content: object,
                                                      says: str) -> None:
    path = tmp_path / "bad-model.json"
    _write(path, content)

    with pytest.raises(RankerError) as caught:
        load_model(path)

    message = str(caught.value)
    assert "\n" not in message
    assert str(path) in message
    assert says in message


def test_an_unreadable_model_file_is_one_line_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "model.json"
    path.mkdir()  # open() fails on a folder even as root, where permissions do not

    with pytest.raises(RankerError) as caught:
        load_model(path)

    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"cannot read ranker model {path}")
