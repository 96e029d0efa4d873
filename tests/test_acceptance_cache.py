"""The on-disk acceptance-model cache (specsim.acceptance.cache): a loaded model is the built one, bit for bit;
a corrupt entry is rebuilt; ``SPECSIM_CACHE=0`` turns it off."""

from __future__ import annotations

import numpy as np
import pytest

from specsim.acceptance import cache
from specsim.acceptance.model import AcceptanceModel, _cached_model, _new_model

ARGS = ("dspark", 5, (("chat", (0.8, 0.7, 0.6, 0.5, 0.4)), ("math", (0.9, 0.8, 0.7, 0.6, 0.5))),
        (("sigma_request", 0.9),), "test rates", None, "sts", None)


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECSIM_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("SPECSIM_CACHE", raising=False)
    _cached_model.cache_clear()
    yield tmp_path / "acceptance"
    _cached_model.cache_clear()


def _same(a: AcceptanceModel, b: AcceptanceModel) -> None:
    assert a is not b
    assert a.alpha == b.alpha and a.gamma == b.gamma and a.sigma_request == b.sigma_request
    np.testing.assert_array_equal(a.sts_temperatures, b.sts_temperatures)
    for dom in a.domains:
        np.testing.assert_array_equal(a.beta(dom), b.beta(dom))
    rng_a, rng_b = np.random.default_rng(3), np.random.default_rng(3)
    for x, y in zip(a.sample_blocks("math", 50, rng_a), b.sample_blocks("math", 50, rng_b)):
        np.testing.assert_array_equal(x, y)


def test_a_second_process_loads_the_model_it_built(folder):
    built = _cached_model(*ARGS)
    files = list(folder.glob("*.pkl"))
    assert len(files) == 1
    _cached_model.cache_clear()                      # as a new process: the in-memory cache is empty
    loaded = _cached_model(*ARGS)
    _same(built, loaded)
    _same(_new_model(*ARGS), loaded)                 # and equal to a fresh build that bypasses the cache


def test_the_key_follows_every_input(folder):
    _cached_model(*ARGS)
    other = ARGS[:3] + ((("sigma_request", 0.8),),) + ARGS[4:]
    _cached_model(*other)
    assert len(list(folder.glob("*.pkl"))) == 2
    assert cache.cache_key(*ARGS) != cache.cache_key(*other)


def test_a_corrupt_entry_is_rebuilt_and_replaced(folder):
    built = _cached_model(*ARGS)
    (path,) = folder.glob("*.pkl")
    path.write_bytes(b"not a pickle")
    _cached_model.cache_clear()
    again = _cached_model(*ARGS)
    _same(built, again)
    assert path.read_bytes() != b"not a pickle"


def test_a_foreign_object_is_not_returned(folder):
    import pickle

    _cached_model(*ARGS)
    (path,) = folder.glob("*.pkl")
    path.write_bytes(pickle.dumps({"not": "a model"}))
    _cached_model.cache_clear()
    assert isinstance(_cached_model(*ARGS), AcceptanceModel)


def test_off_switch_writes_nothing(folder, monkeypatch):
    monkeypatch.setenv("SPECSIM_CACHE", "0")
    assert cache.cache_dir() is None
    _cached_model(*ARGS)
    assert not folder.exists()


def test_builtin_tables_are_cached_too(folder):
    from specsim.acceptance.model import built_table, builtin_table

    builtin_table.cache_clear()
    first = builtin_table("dspark", "fig2", 9)              # gamma beyond Fig. 2's rows: rates extended by a solve
    builtin_table.cache_clear()
    again = builtin_table("dspark", "fig2", 9)
    assert first == again == built_table("dspark", "fig2", 9)
    assert len(list(folder.glob("*.pkl"))) == 1
    builtin_table.cache_clear()
