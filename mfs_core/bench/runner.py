"""Run decoding methods side by side on one engine, one model and one set of questions.

Every question's outcome is appended to ``records.jsonl`` as soon as it is decoded, so an
interrupted run picks up where it stopped: a rerun with the same output directory skips
every (method, question) pair already recorded. ``config.json`` pins what a run measured
(set, model, settings); a rerun with other ones is refused rather than mixed in.

Wall time is accounted per record: each record carries the wall time and the time inside
``backend.generate`` (from ``engine.stats``) that passed since the previous record of the
same method, so a method's records sum to its wall time even across resumed runs.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mfs_core.bench.datasets import Dataset, Example
from mfs_core.bench.prompts import render_example
from mfs_core.bench.scoring import answer_key, extract_prediction, score_completions, score_text
from mfs_core.decoders import DECODER_SPECS, DECODERS, decoder_spec
from mfs_core.errors import BackendDeadError
from mfs_core.engine import MFSEngine
from mfs_core.settings import MFSSettings
from mfs_core.types import DecodeResult

__all__ = [
    "BenchMethod",
    "RECORDS_FILE",
    "auto_sc_k",
    "load_records",
    "is_self_consistency",
    "method_settings",
    "parse_method",
    "parse_methods",
    "run_bench",
    "score_result",
]

logger = logging.getLogger(__name__)

RECORDS_FILE = "records.jsonl"
CONFIG_FILE = "config.json"


def is_self_consistency(decoder: str) -> bool:
    """Whether ``decoder`` is self-consistency (:attr:`DecoderSpec.samples`): ``--sc-k`` sets its k and its
    records keep every sample's answer. Read from the live registry, so a decoder registered later counts."""
    return decoder in DECODER_SPECS and DECODER_SPECS[decoder].samples


def _votes(decoder: str) -> bool:
    """Whether ``decoder`` is scored by its vote over completed paths (:attr:`DecoderSpec.votes`): SC, ESC, DeepConf
    (weighted by its traces' confidence), MFS and its variants."""
    return decoder in DECODER_SPECS and DECODER_SPECS[decoder].votes
_CONFIG_KEYS = ("dataset", "kind", "model", "settings")


@dataclass(frozen=True)
class BenchMethod:
    """One column of the comparison: a registered decoder under some settings.

    Attributes:
        label: the name in the table and the records (``"mfs"``, ``"mfs@lambda1=0.4"``).
        decoder: the name in :data:`mfs_core.decoders.DECODERS`.
        overrides: ``MFSSettings`` fields changed for this method, as ``(name, value)`` pairs.
    """

    label: str
    decoder: str
    overrides: tuple[tuple[str, Any], ...] = field(default_factory=tuple)


def parse_method(spec: str) -> BenchMethod:
    """One method from ``"name"`` (a registered decoder) or ``"label:decoder:field=value;field=value"``
    (a registered decoder under its own label with :class:`MFSSettings` fields changed, e.g.
    ``"mfs-m8:mfs:step_beam_size=8;num_rollouts=8"``; the overrides part is optional).

    Values are read as JSON (``0.3``, ``2``, ``null``, ``true``, ``"weighted"``), else kept as text.

    Raises:
        ValueError: an unknown decoder, an empty label or decoder, an override without ``=``, a field
            :class:`MFSSettings` does not have, one the decoder does not take (its params) or a value out of
            range (one line each, naming it).
    """
    parts = [part.strip() for part in spec.split(":", 2)]
    if len(parts) == 1:
        parts.append(parts[0])
    label, decoder = parts[0], parts[1]
    if not label or not decoder:
        msg = f"method {spec!r}: expected 'name' or 'label:decoder[:field=value;...]'"
        raise ValueError(msg)
    if decoder not in DECODERS:
        where = "" if decoder == spec.strip() else f" in {spec!r}"
        msg = f"unknown method {decoder!r}{where}; known: {sorted(DECODERS)}"
        raise ValueError(msg)
    overrides = []
    for item in filter(None, (part.strip() for part in (parts[2].split(";") if len(parts) == 3 else []))):
        name, sep, text = item.partition("=")
        if not sep:
            msg = f"method {spec!r}: override {item!r} is not field=value"
            raise ValueError(msg)
        if name.strip() not in MFSSettings.model_fields:
            msg = f"method {spec!r}: {name.strip()!r} is not a setting (MFSSettings field)"
            raise ValueError(msg)
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            value = text
        overrides.append((name.strip(), value))
    try:
        decoder_spec(decoder).check_params(dict(overrides))  # the decoder's own parameters, in range
    except ValueError as exc:  # ParamNotAccepted, or a one-line ValidationError
        msg = f"method {spec!r}: {exc}"
        raise ValueError(msg) from None
    return BenchMethod(label=label, decoder=decoder, overrides=tuple(sorted(overrides)))


def parse_methods(spec: str | Sequence[str], lambda_sweep: Iterable[float] = ()) -> list[BenchMethod]:
    """Methods from ``"cot,sc,phi,mfs"`` (each item as :func:`parse_method` reads it) plus one MFS method per λ1
    of ``lambda_sweep``.

    Raises:
        ValueError: an unknown or repeated method, a bad override, or an empty list.
    """
    items = [n.strip() for n in (spec.split(",") if isinstance(spec, str) else spec) if n.strip()]
    methods = [parse_method(item) for item in items]
    methods += [BenchMethod(label=f"mfs@lambda1={v:g}", decoder="mfs", overrides=(("prune_lambda", float(v)),))
                for v in lambda_sweep]
    labels = [m.label for m in methods]
    if not methods or len(set(labels)) != len(labels):
        msg = f"methods must be a non-empty list without repeats, got {labels}"
        raise ValueError(msg)
    return methods


def method_settings(base: MFSSettings, method: BenchMethod, sc_k: int | None = None) -> MFSSettings:
    """``base`` with the method's overrides; self-consistency's k (``num_samples``) is ``sc_k``, or without it
    the method's own ``num_samples`` override, else M (``step_beam_size``: SC over as many paths as MFS keeps)."""
    overrides = dict(method.overrides)
    if is_self_consistency(method.decoder):
        overrides["num_samples"] = sc_k if sc_k is not None else overrides.get("num_samples", base.step_beam_size)
    return base.changed(**overrides)


def score_result(
    kind: str, result: DecodeResult, target: Any, settings: MFSSettings, decoder: str, question: str | None = None
) -> tuple[str | None, bool]:
    """``(prediction, correct)`` of one decode under the set's scoring rules.

    Voting methods (sc, ESC, DeepConf and MFS with ``aggregation="majority"``) are scored by
    the majority of their completions' answers (weighted by ``completion_weights`` where a
    decode has them: DeepConf's scores), as the MFS release's eval scripts do with
    ``all_responses``; the others (CoT, φ-Decoding) by the one text they return.
    ``question`` lets a multiple-choice answer given as an option's text count as its letter.
    """
    if _votes(decoder) and settings.aggregation == "majority" and result.completions:
        verdict = score_completions(kind, result.completions, target, result.completion_qualities, question,
                                    result.completion_weights or None)
    else:
        verdict = score_text(kind, result.text, target, question)
    return verdict.prediction, verdict.correct


def auto_sc_k(records: Sequence[dict[str, Any]], reference: str = "mfs", unit: str = "cot") -> int:
    """k for self-consistency so that its output tokens match ``reference``'s.

    ``k = round(mean output tokens of reference / mean output tokens of unit)``, at least 1:
    a self-consistency sample is about as long as a greedy CoT answer.

    Raises:
        ValueError: no successful records of ``reference`` or ``unit``.
    """
    means = {}
    for label in (reference, unit):
        tokens = [r["output_tokens"] for r in records if r["method"] == label and r.get("error") is None]
        if not tokens or sum(tokens) == 0:
            msg = f"--sc-k auto needs finished {label!r} questions in the same run (run methods {unit},{reference})"
            raise ValueError(msg)
        means[label] = sum(tokens) / len(tokens)
    return max(1, round(means[reference] / means[unit]))


def load_records(path: Path) -> list[dict[str, Any]]:
    """Records of ``records.jsonl``; a torn last line (an interrupted write) is dropped.

    Raises:
        ValueError: a malformed line other than the last.
    """
    if not path.is_file():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    records = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as exc:
            if number == len(lines):
                logger.warning("dropping the torn last line of %s", path)
                break
            msg = f"{path}:{number} is not JSON ({exc}); remove the line to resume"
            raise ValueError(msg) from exc
    return records


def _drop_torn_tail(path: Path) -> None:
    """Cut a last line left without its newline by an interrupted write, so appends stay whole lines."""
    if not path.is_file():
        return
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        logger.warning("dropping the unfinished last line of %s", path)
        path.write_bytes(data[: data.rfind(b"\n") + 1])


def _check_config(out_dir: Path, config: dict[str, Any]) -> None:
    path = out_dir / CONFIG_FILE
    if path.is_file():
        old = json.loads(path.read_text(encoding="utf-8"))
        changed = [k for k in _CONFIG_KEYS if old.get(k) != config.get(k)]
        if changed:
            msg = (f"{out_dir} holds a run with other {changed}; resuming would mix measurements. "
                   f"Use another --out directory (or delete {out_dir}).")
            raise ValueError(msg)
    path.write_text(json.dumps(config, indent=2, default=str), encoding="utf-8")


def _record(method: BenchMethod, example: Example, future: Future, kind: str, settings: MFSSettings,
            elapsed: float, generate: float) -> dict[str, Any]:
    record: dict[str, Any] = {
        "method": method.label, "decoder": method.decoder, "index": example.index, "id": example.id,
        "target": example.target, "elapsed_seconds": elapsed, "generate_seconds": generate,
    }
    if is_self_consistency(method.decoder):
        record["sc_k"] = settings.num_samples
    error = future.exception()
    if isinstance(error, BackendDeadError):  # not this question's result: left unrecorded, a rerun decodes it
        raise error
    if error is not None:
        logger.warning("%s failed on question %s: %s", method.label, example.index, error)
        return {**record, "error": f"{type(error).__name__}: {error}", "prediction": None, "correct": False,
                "output_tokens": 0, "prompt_tokens": 0, "flops": 0.0}
    result: DecodeResult = future.result()
    prediction, correct = score_result(kind, result, example.target, settings, method.decoder, example.question)
    if _votes(method.decoder):
        # Each voted path's answer and F, in order. SC's ("sample_*") give SC at every k <= sc_k
        # (bench.curve); a search's ("completion_*") let other final votes be scored from the records.
        prefix = "sample" if is_self_consistency(method.decoder) else "completion"
        record[f"{prefix}_predictions"] = [
            extract_prediction(kind, text, example.target, example.question) for text in result.completions
        ]
        record[f"{prefix}_qualities"] = [round(q, 6) for q in result.completion_qualities]
        if result.completion_weights:
            record[f"{prefix}_weights"] = [round(w, 6) for w in result.completion_weights]
    return {
        **record, "error": None, "prediction": prediction, "correct": correct, "answer": result.answer,
        "vote_share": result.vote_share, "stop_reason": result.stop_reason, "steps": len(result.steps),
        "completions": len(result.completions), "output_tokens": result.output_tokens,
        "prompt_tokens": result.prompt_tokens, "flops": result.flops, "latency_seconds": result.wall_seconds,
        "text": result.text,
    }


def run_bench(
    engine: MFSEngine,
    dataset: Dataset,
    methods: Sequence[BenchMethod],
    out_dir: str | Path,
    *,
    settings: MFSSettings | None = None,
    sc_k: int | str | None = None,
    concurrency: int = 8,
    progress: Callable[..., Any] | None = None,
    warmup: bool = True,
    stop: threading.Event | None = None,
) -> list[dict[str, Any]]:
    """Decode every question of ``dataset`` with every method; append records as they finish.

    Methods run one after the other (self-consistency with ``sc_k="auto"`` last, once CoT
    and MFS have measured their tokens); within a method, ``concurrency`` questions are in
    flight at once, so the engine batches their requests into shared ``generate`` calls.

    Args:
        engine: the engine (and so the model) every method decodes with.
        dataset: the questions.
        methods: the methods, see :func:`parse_methods`.
        out_dir: directory of ``records.jsonl`` and ``config.json`` (created).
        settings: base settings of every method (default: the engine's).
        sc_k: self-consistency's k: an int, ``"auto"`` (:func:`auto_sc_k`), or None (M).
        concurrency: questions decoded together, >= 1.
        progress: a ``tqdm``-like factory ``(total=, initial=, desc=) -> bar`` or None.
        warmup: decode one question with CoT (8 tokens, untimed, not recorded) before the
            first method, so that one-time costs do not land on whichever method runs first.
        stop: once set (e.g. by :func:`~mfs_core.bench.drain.drain_on_sigterm`), no further
            question is started: the questions in flight finish and are recorded, later methods
            are skipped, and the records so far are returned (a rerun resumes).

    Returns:
        Every record of the current questions and methods (old and new), in file order.

    Raises:
        ValueError: ``concurrency`` < 1, a bad ``sc_k``, an output directory of another run.
        BackendDeadError: the model died during the run (vLLM's engine core killed, out of memory). The
            questions it took down are not recorded (a question's own failure is, with its ``error``), so a
            rerun on a fresh engine with the same output directory decodes them; the records before stay.
    """
    if concurrency < 1:
        msg = f"concurrency must be >= 1, got {concurrency}"
        raise ValueError(msg)
    if isinstance(sc_k, str) and sc_k != "auto" or isinstance(sc_k, int) and sc_k < 1:
        msg = f"sc_k must be a positive int, 'auto' or None, got {sc_k!r}"
        raise ValueError(msg)
    base = settings or engine.settings
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    _check_config(out, {
        "dataset": dataset.name, "kind": dataset.kind, "path": str(dataset.path), "model": base.model,
        "num_parameters": engine.backend.num_parameters, "settings": base.model_dump(mode="json"),
        "methods": [m.label for m in methods], "sc_k": sc_k,
    })
    records_path = out / RECORDS_FILE
    _drop_torn_tail(records_path)
    records = load_records(records_path)
    by_index = {ex.index: ex for ex in dataset.examples}
    for rec in records:
        ex = by_index.get(rec["index"])
        if ex is not None and rec["id"] != ex.id:
            msg = f"{records_path}: question {rec['index']} has id {rec['id']!r}, the set says {ex.id!r}"
            raise ValueError(msg)
    prompts = {ex.index: render_example(ex, engine.backend, base) for ex in dataset.examples}
    ordered = sorted(methods, key=lambda m: is_self_consistency(m.decoder) and sc_k == "auto")
    done_pairs = {(r["method"], r["index"]) for r in records}
    missing = any((m.label, ex.index) not in done_pairs for m in methods for ex in dataset.examples)
    if warmup and missing and not (stop is not None and stop.is_set()):
        # One short untimed decode first, so one-time costs (allocation, kernels) land on no method.
        short = base.changed(max_answer_tokens=8)
        engine.decode_prompts([prompts[dataset.examples[0].index]], settings=short, method="cot")
    with records_path.open("a", encoding="utf-8") as sink:
        for method in ordered:
            if stop is not None and stop.is_set():
                logger.warning("stopped before %s; rerun with the same output directory to resume", method.label)
                break
            current = [r for r in records if r["index"] in by_index]
            k = auto_sc_k(current) if is_self_consistency(method.decoder) and sc_k == "auto" else sc_k
            msettings = method_settings(base, method, k if isinstance(k, int) else None)
            done = {r["index"] for r in records if r["method"] == method.label}
            todo = [ex for ex in dataset.examples if ex.index not in done]
            bar = progress(total=len(dataset.examples), initial=len(dataset.examples) - len(todo), desc=method.label) \
                if progress else None
            for rec in _run_method(engine, method, msettings, dataset.kind, todo, prompts, concurrency, stop):
                sink.write(json.dumps(rec, default=str) + "\n")
                sink.flush()
                records.append(rec)
                if bar is not None:
                    bar.update(1)
            if bar is not None:
                bar.close()
    labels = {m.label for m in methods}
    return [r for r in records if r["method"] in labels and r["index"] in by_index]


def _run_method(engine: MFSEngine, method: BenchMethod, settings: MFSSettings, kind: str, todo: list[Example],
                prompts: dict[int, str], concurrency: int,
                stop: threading.Event | None = None) -> Iterable[dict[str, Any]]:
    """Yield one record per question as it finishes, ``concurrency`` questions in flight; once ``stop`` is
    set, start no more and drain the ones in flight."""
    pending = list(reversed(todo))
    flight: dict[Future, Example] = {}
    last_time, last_generate = time.perf_counter(), engine.stats.generate_seconds
    while pending or flight:
        if stop is not None and stop.is_set() and pending:
            logger.warning("%s: %d question(s) not started, %d in flight finishing", method.label, len(pending),
                           len(flight))
            pending.clear()
        batch = [pending.pop() for _ in range(min(len(pending), concurrency - len(flight)))]
        if batch:  # one submission, so the engine starts them in the same round
            keys = [answer_key(kind, ex.question) for ex in batch]  # multiple choice: votes by its options
            futures = engine.submit_prompts([prompts[ex.index] for ex in batch], settings=settings,
                                            method=method.decoder, answer_key=keys)
            flight.update(zip(futures, batch))
        finished, _ = wait(list(flight), return_when=FIRST_COMPLETED)
        for future in sorted(finished, key=lambda f: flight[f].index):
            now, generate = time.perf_counter(), engine.stats.generate_seconds
            yield _record(method, flight.pop(future), future, kind, settings, now - last_time, generate - last_generate)
            last_time, last_generate = now, generate
