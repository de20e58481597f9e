# tests/launch/tb_eval_check.py: the evaluations of a run with experiment.eval_every, as
# TensorBoard reads them from the run's events files (RUN_DIR/tb; launch/evals.h): for every
# evaluation that finished (RUN_DIR/videos/eval_<N>.json, with its eval_<N>.gif):
#   - the image eval/video at step N (EventAccumulator's images): the GIF's bytes exactly,
#     starting with GIF89a, and the GIF's own width and height (its logical screen);
#   - as TensorBoard serves it (plugin_event_accumulator, data_compat): a tensor of the images
#     plugin at step N;
#   - the scalars eval/return_mean, eval/return_std, eval/length_mean at step N equal to the
#     JSON's (float32);
# and no eval/ value at a step without a finished evaluation.
# usage: python tb_eval_check.py RUN_DIR
import glob
import json
import math
import os
import struct
import sys

from tensorboard.backend.event_processing import event_accumulator as ea
from tensorboard.backend.event_processing import plugin_event_accumulator as pea


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def main():
    run = sys.argv[1]
    evals = {}
    for path in glob.glob(os.path.join(run, "videos", "eval_*.json")):
        step = int(os.path.basename(path)[len("eval_"):-len(".json")])
        with open(path) as f:
            text = f.read()
        if not text.strip():
            continue  # an evaluation that did not finish: nothing logged
        gif = path[:-len(".json")] + ".gif"
        if not os.path.exists(gif):
            fail(f"{gif} missing beside {path}")
        with open(gif, "rb") as f:
            evals[step] = (json.loads(text), f.read())
    if not evals:
        fail(f"no finished evaluation in {run}/videos")

    acc = ea.EventAccumulator(os.path.join(run, "tb"), size_guidance={ea.IMAGES: 0, ea.SCALARS: 0})
    acc.Reload()
    if "eval/video" not in acc.Tags()["images"]:
        fail(f"no image eval/video: images {acc.Tags()['images']}")
    images = {e.step: e for e in acc.Images("eval/video")}
    if sorted(images) != sorted(evals):
        fail(f"eval/video at steps {sorted(images)}, evaluations finished at {sorted(evals)}")
    for step, (result, gif) in sorted(evals.items()):
        im = images[step]
        if im.encoded_image_string != gif:
            fail(f"step {step}: the image holds {len(im.encoded_image_string)} bytes, "
                 f"not the {len(gif)} of the GIF")
        if not gif.startswith(b"GIF89a"):
            fail(f"step {step}: the image does not start with GIF89a: {gif[:6]!r}")
        width, height = struct.unpack("<HH", gif[6:10])
        if (im.width, im.height) != (width, height):
            fail(f"step {step}: image {im.width} x {im.height}, the GIF is {width} x {height}")
        for key in ("return_mean", "return_std", "length_mean"):
            got = {s.step: s.value for s in acc.Scalars(f"eval/{key}")}
            if step not in got:
                fail(f"step {step}: no eval/{key}")
            if not math.isclose(got[step], result[key], rel_tol=3e-7, abs_tol=1e-6):
                fail(f"step {step}: eval/{key} {got[step]!r}, the JSON {result[key]!r}")
        print(f"step {step}: eval/video {width} x {height}, {len(gif)} bytes; return "
              f"{result['return_mean']:g} (std {result['return_std']:g}), length "
              f"{result['length_mean']:g}")
    for key in ("return_mean", "return_std", "length_mean"):
        steps = sorted(s.step for s in acc.Scalars(f"eval/{key}"))
        if steps != sorted(evals):
            fail(f"eval/{key} at steps {steps}, evaluations at {sorted(evals)}")

    # as TensorBoard's server reads them: images migrated to tensors of the images plugin
    served = pea.EventAccumulator(os.path.join(run, "tb"), size_guidance={"tensors": 0})
    served.Reload()
    if "eval/video" not in served.Tags()["tensors"]:
        fail(f"TensorBoard serves no eval/video tensor: {served.Tags()['tensors']}")
    meta = served.SummaryMetadata("eval/video")
    if meta.plugin_data.plugin_name != "images":
        fail(f"eval/video is served by plugin {meta.plugin_data.plugin_name!r}, not images")
    steps = sorted(t.step for t in served.Tensors("eval/video"))
    if steps != sorted(evals):
        fail(f"TensorBoard serves eval/video at steps {steps}, evaluations at {sorted(evals)}")
    print(f"{len(evals)} evaluations in TensorBoard: eval/video (images plugin) and scalars at "
          f"steps {sorted(evals)}")


main()
