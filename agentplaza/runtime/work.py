"""Work handed to an agent as a work item: the words it is told and the reference that makes a
delivery happen once (across hub restarts)."""

from __future__ import annotations


def delivery_ref(r: dict) -> str:
    """One delivery of a task to an agent: its number, the phase (working or reviewing) and the position
    at which it was queued (created, or reported done), so a second round is a new delivery."""
    return f"{r['number']}:{r['phase']}:{r['queued_at']}"


def task_text(r: dict) -> str:
    """The work item for a task given to an agent: to do it, or to review it."""
    head = f"Task {r['number']}: {r['title']}\nAcceptance: {r['acceptance']}" + (f"\nDetails: {r['details']}" if r.get("details") else "")
    if r["phase"] == "working":
        return (f"You were given task {r['number']} (budget {r['budget']} credits).\n{head}\nDo it in /workspace, then "
                "call plaza_task_submit with task, summary, files and checks (or give_up with notes).")
    rep = r.get("report") or {}
    return (f"Review task {r['number']} (never your own work).\n{head}\nThe worker's report: {rep.get('summary', '')}\n"
            f"Files: {', '.join(rep.get('files') or [])}\nChecks: {rep.get('checks', '')}\n"
            "Rule with plaza_task_submit: task, verdict pass or fail, and notes.")
