"""agentplaza decide QUESTION [--option A --option B ... | --score [--min N --max M]] [--model M]:
ask the plaza's decision model and print a probability for each answer."""

from __future__ import annotations

from ..env import Env

#: The widest bar a probability is drawn with.
BAR_WIDTH = 30


def kind_of(a) -> str:
    if a.score:
        return "score"
    return "choice" if a.option else "yes_no"


def body(a) -> dict:
    out: dict = {"question": a.question, "kind": kind_of(a)}
    if a.option:
        out["options"] = a.option
    if a.min is not None or a.max is not None:
        out["scale"] = [a.min if a.min is not None else 1, a.max if a.max is not None else 5]
    if a.model:
        out["model"] = a.model
    return out


def render(d: dict) -> str:
    width = max(len(x["answer"]) for x in d["answers"])
    lines = []
    for x in d["answers"]:
        p = x["probability"]
        mark = "  <" if x["answer"] == d["best"] else ""
        lines.append(f"{x['answer'].ljust(width)}  {p:6.1%}  {'█' * round(p * BAR_WIDTH)}{mark}")
    lines.append(f"asked {d['model']}" + (f" (effort {d['effort']})" if d.get("effort") else ""))
    return "\n".join(lines)


NAME = "decide"
HELP = "ask the plaza's decision model a yes or no question, a choice, or a score"


def register(sub) -> None:
    p = sub.add_parser(NAME, help=HELP, description=HELP + "; it prints a probability for each answer")
    p.add_argument("question", help="the question (yes or no, unless --option or --score)")
    kind = p.add_mutually_exclusive_group()
    kind.add_argument("--option", "-o", action="append", metavar="OPTION", help="an option of a choice (give two or more)")
    kind.add_argument("--score", action="store_true", help="a score on a scale (1 to 5 unless --min/--max)")
    p.add_argument("--min", type=int, help="the lowest score")
    p.add_argument("--max", type=int, help="the highest score")
    p.add_argument("--model", help="one of the plaza's decision models (agentplaza models decision)")


def run(env: Env) -> int:
    return env.show(env.client.post("/v1/decide", body(env.args)), render)
