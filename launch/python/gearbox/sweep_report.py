"""gearbox/sweep_report.py: a sweep's results: the table of its trials (trials.csv and printed),
sweep.json, and the plot of the objective against each swept key (objective.png, matplotlib)."""
import csv
import json

FIXED_COLUMNS = ("trial", "status", "exit_status", "exit_reason", "solved", "objective")
TAIL_COLUMNS = ("wall_seconds", "env_steps", "run_dir", "error")


def best_trial(trials, direction):
    """The trial with the best objective among those that ended ("ok") with one, or None."""
    scored = [t for t in trials if t["status"] == "ok" and t["objective"] is not None]
    if not scored:
        return None
    pick = min if direction == "min" else max
    return pick(scored, key=lambda t: t["objective"])


def _cell(value):
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def write_table(path, trials, keys):
    """Writes trials.csv: one row a trial (failed ones too), its swept values and results."""
    columns = list(FIXED_COLUMNS) + list(keys) + list(TAIL_COLUMNS)
    with open(path, "w", encoding="utf-8", newline="") as f:
        w = csv.writer(f)
        w.writerow(columns)
        for t in trials:
            w.writerow([_cell(t["params"].get(c) if c in keys else t.get(c)) for c in columns])


def format_table(trials, keys, best, objective_key):
    """The trials as a fixed-width text table, the best marked with *, for printing."""
    columns = ["trial", "status"] + list(keys) + [objective_key, "solved", "exit_reason"]
    rows = []
    for t in trials:
        mark = "*" if best is not None and t is best else " "
        vals = [mark + t["trial"], t["status"]] + [_cell(t["params"].get(k)) for k in keys]
        vals += [_cell(t["objective"]), _cell(t.get("solved")), _cell(t.get("exit_reason"))]
        rows.append(vals)
    header = [" trial"] + columns[1:]
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(columns))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(header, widths))]
    lines += ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)) for r in rows]
    return "\n".join(lines)


def write_json(path, sweep, trials, best):
    """Writes sweep.json: the sweep's settings, every trial and the best one's name."""
    doc = {"name": sweep.name, "method": sweep.method, "objective": sweep.objective_key,
           "direction": sweep.direction, "parallel": sweep.parallel,
           "params": [p.key for p in sweep.params],
           "best": best["trial"] if best else None, "trials": trials}
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1, default=str)
        f.write("\n")


def _numeric(values):
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)


def write_plot(path, sweep, trials, best):
    """Draws objective.png: one panel a swept key, the objective of each trial that has one
    against the key's value (a log axis for log-uniform or decade-spanning values; categories
    in order), the best trial as a star. Returns None, or why there is no plot (no matplotlib,
    no trial with an objective)."""
    try:
        import matplotlib  # noqa: PLC0415 (optional)
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError:
        return "matplotlib is not installed (pip install matplotlib)"
    scored = [t for t in trials if t["status"] == "ok" and t["objective"] is not None]
    if not scored:
        return "no trial has an objective to plot"
    unplotted = len(trials) - len(scored)
    n = len(sweep.params)
    fig, axes = plt.subplots(1, n, figsize=(4.2 * n, 3.6), squeeze=False)
    for ax, p in zip(axes[0], sweep.params):
        xs = [t["params"][p.key] for t in scored]
        ys = [t["objective"] for t in scored]
        if _numeric(xs):
            px = list(xs)
            if p.log_scale():
                ax.set_xscale("log")
        else:
            cats = [str(v) for v in (p.values or [])] or sorted({str(v) for v in xs})
            px = [cats.index(str(v)) for v in xs]
            ax.set_xticks(range(len(cats)), cats)
        ax.scatter(px, ys, color="tab:blue", alpha=0.8)
        if best is not None:
            bx = best["params"][p.key]
            bx = bx if _numeric([bx]) else px[scored.index(best)]
            ax.scatter([bx], [best["objective"]], marker="*", s=220, color="tab:red",
                       label=best["trial"], zorder=3)
            ax.legend(loc="best", fontsize=8)
        ax.set_xlabel(p.key)
        better = "lower" if sweep.direction == "min" else "higher"
        ax.set_ylabel(f"{sweep.objective_key} ({better} is better)")
        ax.grid(True, alpha=0.3)
    title = f"{sweep.name}: {len(scored)} trials"
    if unplotted:
        title += f" ({unplotted} failed or without {sweep.objective_key}: not shown)"
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return None

