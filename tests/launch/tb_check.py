# tests/launch/tb_check.py: reads a run's TensorBoard files (RUN_DIR/tb) with TensorBoard's own
# readers and compares them with its metrics.csv, row by row: one summary event per row, in the
# same order, step = the row's env_steps, one tag per column with a value ("<group>/<column>",
# the scheme of runtime/run/tensorboard.h, restated here), values equal within float32 precision.
# The records are read twice: as written (RawEventFileLoader, TensorBoard's event_pb2: framing,
# CRCs, simple_value) and as TensorBoard serves them (EventFileLoader, which turns simple_value
# into scalar-plugin tensors; EventAccumulator's scalar tags). Also checks that the tags named
# on the command line appeared (with a value) and those after --absent never did. Events of
# evaluations (experiment.eval_every: eval/ tags, launch/evals.h; tb_eval_check.py checks them)
# are not rows and are left out.
# usage: python tb_check.py RUN_DIR TAG... [--absent TAG...]
import csv
import glob
import math
import os
import sys

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.backend.event_processing.event_file_loader import (EventFileLoader,
                                                                    RawEventFileLoader)
from tensorboard.compat.proto import event_pb2
from tensorboard.util import tensor_util

GROUPS = {
    "losses": ["loss", "policy_loss", "value_loss", "entropy", "approx_kl", "q_mean"],
    "train": ["lr", "epsilon", "alpha", "grad_norm", "clip_fraction", "explained_var",
              "td_abs_mean"],
    "perf": ["env_steps_per_s", "train_steps_per_s", "time_s", "wall_s", "train_steps",
             "samples_trained"],
    "replay": ["replay_size", "replay_fill", "sample_drops", "chunks_rejected", "trained_share"],
    "policy": ["policy_version", "served_version_min", "version_lag"],
    "run": ["segment"],
}


def tag_of(column):
    for group, columns in GROUPS.items():
        if column in columns:
            return f"{group}/{column}"
    return f"charts/{column}"


def is_eval(event):
    return bool(event.summary.value) and all(v.tag.startswith("eval/")
                                             for v in event.summary.value)


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def main():
    args = sys.argv[1:]
    run = args.pop(0)
    absent = []
    if "--absent" in args:
        i = args.index("--absent")
        absent = args[i + 1:]
        args = args[:i]
    wanted = args
    files = sorted(glob.glob(os.path.join(run, "tb", "events.out.tfevents.*")))
    if not files:
        fail(f"no events file in {run}/tb")
    events, served = [], []
    for path in files:  # one a launch (a resumed run has several), in the order written
        loaded = [event_pb2.Event.FromString(r) for r in RawEventFileLoader(path).Load()]
        if not loaded or loaded[0].file_version != "brain.Event:2":
            fail(f"{path}: the first event is not file_version brain.Event:2")
        events += [e for e in loaded[1:] if not is_eval(e)]
        served += [e for e in list(EventFileLoader(path).Load())[1:] if not is_eval(e)]
    if len(served) != len(events):
        fail(f"EventFileLoader read {len(served)} events, the raw reader {len(events)}")
    with open(os.path.join(run, "metrics.csv")) as f:
        rows = list(csv.DictReader(f))
    if len(events) != len(rows):
        fail(f"{len(events)} summary events, {len(rows)} rows in metrics.csv")
    seen = set()
    compared = 0
    for i, (event, row) in enumerate(zip(events, rows)):
        if event.step != int(float(row["env_steps"])) or served[i].step != event.step:
            fail(f"row {i}: step {event.step}, env_steps {row['env_steps']}")
        if any(v.WhichOneof("value") != "simple_value" for v in event.summary.value):
            fail(f"row {i}: a value that is not a simple_value")
        got = {v.tag: v.simple_value for v in event.summary.value}
        as_served = {v.tag: float(tensor_util.make_ndarray(v.tensor))
                     for v in served[i].summary.value
                     if v.metadata.plugin_data.plugin_name == "scalars"}
        if as_served != got:
            fail(f"row {i}: TensorBoard serves {as_served}, the file holds {got}")
        want = {tag_of(c): float(v) for c, v in row.items()
                if c != "env_steps" and v != "" and math.isfinite(float(v))}
        if set(got) != set(want):
            fail(f"row {i}: tags {sorted(set(got) ^ set(want))} in one but not the other")
        for tag, v in want.items():
            # TensorBoard keeps float32; metrics.csv prints 10 significant digits
            if not math.isclose(got[tag], v, rel_tol=3e-7, abs_tol=1e-30):
                fail(f"row {i}: {tag} = {got[tag]!r} in TensorBoard, {v!r} in metrics.csv")
            compared += 1
        seen |= set(got)
    missing = [t for t in wanted if t not in seen]
    if missing:
        fail(f"tags never written: {missing} (written: {sorted(seen)})")
    present = [t for t in absent if t in seen]
    if present:
        fail(f"tags that should be empty for this algorithm were written: {present}")
    acc = EventAccumulator(os.path.join(run, "tb"))
    acc.Reload()
    scalars = {t for t in acc.Tags()["scalars"] if not t.startswith("eval/")}
    if scalars != seen:
        fail(f"EventAccumulator's scalars differ: {sorted(scalars ^ seen)}")
    last = acc.Scalars("charts/episodes")[-1] if "charts/episodes" in scalars else None
    print(f"{len(files)} events files, {len(events)} events = {len(rows)} metrics.csv rows, "
          f"{compared} values equal, {len(seen)} tags" +
          (f"; last charts/episodes {last.value:g} at step {last.step}" if last else ""))


main()
