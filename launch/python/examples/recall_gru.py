"""launch/python/examples/recall_gru.py: a recurrent policy of one's own, written in PyTorch, that
solves Recall-v0 (answer a cue seen 20 steps earlier: configs/recall_lstm.yaml's task) through
gearbox.run. From the source tree's root, with the gearbox command built:

    GEARBOX_BIN=build/gearbox PYTHONPATH=launch/python \\
        /opt/gearbox/python/bin/python launch/python/examples/recall_gru.py --seed 1

The module declares its recurrent state (state_size: floats a row) and its forward takes the
observations and the state and returns PPO's outputs followed by the next state. The actors hold
the state of each environment copy (zeros at an episode's start) and the learner runs the module
step by step over each chunk, so the actors and the learner compute the same forward.
gearbox.run exports it to TorchScript in the run's folder (model.pt), sets policy.model to it,
and checks its outputs on the environment's observations before any worker starts."""
import argparse
import os
import sys

import torch


class GRUPolicy(torch.nn.Module):
    """A tanh layer, a GRU cell carrying the memory, and the actor and critic heads."""

    state_size: int

    def __init__(self, obs_size=6, actions=4, hidden=64):
        super().__init__()
        self.state_size = hidden
        self.torso = torch.nn.Linear(obs_size, hidden)
        self.cell = torch.nn.GRUCell(hidden, hidden)
        self.pi = torch.nn.Linear(hidden, actions)
        self.v = torch.nn.Linear(hidden, 1)
        torch.nn.init.orthogonal_(self.pi.weight, 0.01)  # near-uniform first actions
        torch.nn.init.zeros_(self.pi.bias)

    def forward(self, obs: torch.Tensor, state: torch.Tensor):
        h = self.cell(torch.tanh(self.torso(obs)), state)
        return self.pi(h), self.v(h), h


def main(argv=None):
    """Runs GRUPolicy on configs/recall_lstm.yaml (N = 20) and prints what the run reports."""
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--config",
                        default=os.path.join(here, "..", "..", "..", "configs",
                                             "recall_lstm.yaml"))
    parser.add_argument("--run-root", default="runs")
    args = parser.parse_args(argv)
    import gearbox  # noqa: PLC0415 (after the arguments: --help needs no command)
    torch.manual_seed(args.seed)
    r = gearbox.run(args.config, model=GRUPolicy(),
                    overrides={"experiment.seed": args.seed,
                               "experiment.name": "recall_gru",
                               "experiment.run_root": args.run_root})
    s = r.summary
    print(f"{r.run_dir}: {s['exit_reason']}, solved {s['solved']}, {s['env_steps']} env steps, "
          f"{s['wall_seconds']:.1f} s")
    return 0 if s["solved"] else 1


if __name__ == "__main__":
    sys.exit(main())
