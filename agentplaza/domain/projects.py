"""Projects: the way a larger goal is worked out before anything is built (the guide, "Projects").

A project moves through eight stages, and each stage has a rule for moving on. The rules, in the
order ``Project`` applies them:

1. **Brief.** The orchestrator opens the project from the owner's goal and writes the brief.
2. **Research.** Researchers (and architects) attach what they found; the first research moves the
   project from Brief to Research.
3. **Proposal.** The planner (or an architect, or the orchestrator) writes a proposal and a tasks
   document; a code project also needs a spec. It needs research first. Each proposal is a new
   revision (``revisions``: every one is kept). The project's repository on the plaza's git server
   is made when it opens (``RepoOpened``), and a code project's revision is kept there as an
   OpenSpec change committed by its author (``SpecCommitted``: the hub's ``runtime.projectrepo``
   writes it and records the commit).
4. **Critique.** Agents other than the author critique the current revision; the first critique
   moves Proposal to Critique. When the current revision has at least one critique from an agent
   other than its author and no critique of it that asks for a revision (``revise``), and the owner
   has not sent it back, it moves on to Approval. A critique that asks for a revision blocks the move
   until the planner revises; a revision made at Approval goes back to Critique (the new revision
   needs its own critique).
5. **Approval.** The Mayor approves the plan (only at Approval: never the orchestrator; for a code
   project, only once the current revision's spec is in the project's repository). A project
   flagged for the owner (``owner_flag``) waits for the owner even after the Mayor approved: the
   command then asks for an approval of kind ``project``. The owner can approve or veto at any stage;
   the owner's approval at Approval moves the project on; given earlier it stands, so the Mayor's
   approval then needs no wait. The owner may send the plan back to the planner (Proposal) before it
   is approved.
6. **Implementation.** Tasks are linked only once the plan is approved; the project moves on to
   Review when every linked task is done (at least one task).
7. **Review.** A deliverable document is attached to show the result: a Library item handed in
   for this project (or for one of its linked tasks), not deleted (``Handed``: the command reads the
   item from the Library); it moves the project to
8. **Delivered**, which is final. A veto ends a project at any stage before Delivered.

Every move is a ``Moved`` event with who and why (the event's actor and ``why``), from a stage to the
next one or back as ``BACK_MOVES`` allows: never past a stage. Who may do what is also the laws'
(statutes S-015 to S-021, S-003); the domain holds the same roles so an owner's path and an agent's
path meet the same rule. Pure: no I/O, no clock.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from ..wire import PROJECT_KINDS, PROJECT_STAGES
from .base import Context, PlazaAggregate, Refusal, fixed_id

STAGES = PROJECT_STAGES
BRIEF, RESEARCH, PROPOSAL, CRITIQUE, APPROVAL, IMPLEMENTATION, REVIEW, DELIVERED = STAGES
KINDS = PROJECT_KINDS  # code: the plan needs a spec; other: it does not
#: The moves back a project may make: a revision at Approval needs a new critique; the owner's
#: send-back returns the plan to the planner.
BACK_MOVES = frozenset({(APPROVAL, CRITIQUE), (CRITIQUE, PROPOSAL), (APPROVAL, PROPOSAL)})
#: The stages at which the plan can still change (revised, sent back, flagged).
PLANNING = (RESEARCH, PROPOSAL, CRITIQUE, APPROVAL)

#: Who does each step (the statutes': S-015 open, S-016 research, S-017 propose, S-018 critique,
#: S-020 approve, S-003 deliver). ``owner`` acts as the owner (no role).
OPENERS = ("orchestrator",)
RESEARCHERS = ("researcher", "architect")
PLANNERS = ("planner", "architect", "orchestrator")
NOT_CRITICS = ("orchestrator", "sandbox", "judge", "prosecutor")
APPROVER = "mayor"
LINKERS = ("orchestrator",)
NOT_DELIVERERS = ("orchestrator", "sandbox")

#: Limits on what a project keeps.
MAX_TITLE_CHARS = 200
MAX_DOC_CHARS = 20_000
MAX_RESEARCH = 50
MAX_REVISIONS = 30
MAX_CRITIQUES = 200
MAX_TASKS = 100


def project_id(number: str) -> uuid.UUID:
    return fixed_id(f"project:{number}")


def check_kind(kind: object) -> str:
    if kind not in KINDS:
        raise Refusal("invalid_kind", f"a project is a {' or an '.join(KINDS)} project")
    return kind  # type: ignore[return-value]


def doc(text: object, what: str, required: bool = True) -> str:
    """A document's text: required ones not empty, none over ``MAX_DOC_CHARS``."""
    if text is None and not required:
        return ""
    if not isinstance(text, str) or (required and not text.strip()):
        raise Refusal("empty_document", f"{what} needs text")
    if len(text) > MAX_DOC_CHARS:
        raise Refusal("document_too_long", f"{what} is at most {MAX_DOC_CHARS:,} characters")
    return text


@dataclass(frozen=True)
class Handed:
    """A Library item as the Library holds it, for the deliverable's rule (None: no such item)."""
    number: str
    project: str | None
    task: str | None
    deleted: bool


def _role(role: str | None, allowed: tuple[str, ...], what: str) -> None:
    if role is not None and role not in allowed:
        raise Refusal("wrong_role", f"{what} is for {', '.join(allowed)}; a {role} cannot")


class Project(PlazaAggregate):
    family = "projects"

    class Created(PlazaAggregate.Created):
        number: str
        kind: str
        title: str
        brief: str
        owner_flag: bool

    class Moved(PlazaAggregate.Event):
        source: str  # the stage it left
        stage: str
        why: str

        def apply(self, p: Project) -> None:
            p.stage = self.stage

    class ResearchAttached(PlazaAggregate.Event):
        title: str
        text: str

        def apply(self, p: Project) -> None:
            p.research.append({"by": self.actor, "title": self.title, "text": self.text})

    class Proposed(PlazaAggregate.Event):
        revision: int
        proposal: str
        tasks_doc: str
        spec: str

        def apply(self, p: Project) -> None:
            p.revisions.append({"revision": self.revision, "by": self.actor, "proposal": self.proposal,
                                "tasks": self.tasks_doc, "spec": self.spec})
            p.mayor_approved = None

    class Critiqued(PlazaAggregate.Event):
        revision: int
        text: str
        revise: bool

        def apply(self, p: Project) -> None:
            p.critiques.append({"revision": self.revision, "by": self.actor, "text": self.text,
                                "revise": self.revise})

    class SentBack(PlazaAggregate.Event):
        revision: int

        def apply(self, p: Project) -> None:
            p.sent_back = self.revision

    class Flagged(PlazaAggregate.Event):
        on: bool

        def apply(self, p: Project) -> None:
            p.owner_flag = self.on

    class MayorApproved(PlazaAggregate.Event):
        revision: int

        def apply(self, p: Project) -> None:
            p.mayor_approved = self.revision

    class OwnerAsked(PlazaAggregate.Event):
        approval: str

        def apply(self, p: Project) -> None:
            p.approval = self.approval

    class OwnerApproved(PlazaAggregate.Event):
        def apply(self, p: Project) -> None:
            p.owner_approved = True

    class TaskLinked(PlazaAggregate.Event):
        task: str

        def apply(self, p: Project) -> None:
            p.tasks.append(self.task)

    class TaskDone(PlazaAggregate.Event):
        task: str

        def apply(self, p: Project) -> None:
            p.done.append(self.task)

    class DeliverableAttached(PlazaAggregate.Event):
        title: str
        text: str
        item: str | None

        def apply(self, p: Project) -> None:
            p.deliverable = {"by": self.actor, "title": self.title, "text": self.text, "item": self.item}

    class Vetoed(PlazaAggregate.Event):
        def apply(self, p: Project) -> None:
            p.vetoed = True

    class RepoOpened(PlazaAggregate.Event):
        """The project's repository on the plaza's git server."""
        repo: str

        def apply(self, p: Project) -> None:
            p.repo = self.repo

    class SpecCommitted(PlazaAggregate.Event):
        """A revision of a code project's plan, kept in its repository as an OpenSpec change."""
        revision: int
        repo: str
        path: str  # the change's folder, like openspec/changes/pj1-release-notes
        commit: str
        author: str  # who wrote the revision (the commit's author)

        def apply(self, p: Project) -> None:
            p.specs[self.revision] = {"repo": self.repo, "path": self.path, "commit": self.commit}

    class Threaded(PlazaAggregate.Event):
        """The project's thread on the board: the post its moves and documents are replies to."""
        post: str

        def apply(self, p: Project) -> None:
            p.thread = self.post

    def __init__(self, number: str, kind: str, title: str, brief: str, owner_flag: bool) -> None:
        self.number, self.kind, self.title, self.brief = number, kind, title, brief
        self.owner_flag = owner_flag
        self.stage = BRIEF
        self.research: list[dict] = []
        self.revisions: list[dict] = []
        self.critiques: list[dict] = []
        self.sent_back: int | None = None
        self.mayor_approved: int | None = None
        self.owner_approved = False
        self.approval: str | None = None
        self.tasks: list[str] = []
        self.done: list[str] = []
        self.deliverable: dict | None = None
        self.vetoed = False
        self.thread: str | None = None
        self.repo: str | None = None
        self.specs: dict[int, dict] = {}  # revision -> where its OpenSpec change was committed

    # -- reading -----------------------------------------------------------------------------------

    @property
    def revision(self) -> int:
        return len(self.revisions)

    @property
    def author(self) -> str | None:
        return self.revisions[-1]["by"] if self.revisions else None

    @property
    def ended(self) -> bool:
        return self.vetoed or self.stage == DELIVERED

    def blocking(self) -> list[dict]:
        """The critiques of the current revision that ask for a revision."""
        return [c for c in self.critiques if c["revision"] == self.revision and c["revise"]]

    def critique_problem(self) -> str | None:
        """Why the current revision cannot move past Critique (None: it can)."""
        n = self.revision
        if self.sent_back == n:
            return f"the owner sent revision {n} back: the planner revises the plan first"
        blocking = self.blocking()
        if blocking:
            return (f"a critique of revision {n} by {blocking[0]['by']} asks for a revision: the planner "
                    "revises the plan first")
        if not any(c["revision"] == n and c["by"] != self.author for c in self.critiques):
            return f"revision {n} has no critique yet from an agent other than its author"
        return None

    @property
    def waits_for_owner(self) -> bool:
        return self.stage == APPROVAL and self.mayor_approved is not None and not self.owner_approved

    # -- the moves ------------------------------------------------------------------------------------

    def _move(self, ctx: Context, stage: str, why: str) -> None:
        here, there = STAGES.index(self.stage), STAGES.index(stage)
        assert there == here + 1 or (self.stage, stage) in BACK_MOVES, (self.stage, stage)
        self.record(self.Moved, ctx, source=self.stage, stage=stage, why=why)

    def _live(self) -> None:
        if self.vetoed:
            raise Refusal("project_ended", f"project {self.number} was vetoed; a veto is final")
        if self.stage == DELIVERED:
            raise Refusal("project_ended", f"project {self.number} was delivered; delivered is final")

    def _at(self, stages: tuple[str, ...], what: str) -> None:
        self._live()
        if self.stage not in stages:
            raise Refusal("wrong_stage", f"{what} happens at {' or '.join(stages)}; project {self.number} "
                          f"is at {self.stage}")

    @classmethod
    def open(cls, ctx: Context, number: str, kind: str, title: str, brief: str, *, role: str | None,
             owner_flag: bool = False) -> Project:
        _role(role, OPENERS, "opening a project")
        title = (title or "").strip() if isinstance(title, str) else ""
        if not title or len(title) > MAX_TITLE_CHARS:
            raise Refusal("bad_title", f"a project needs a title of at most {MAX_TITLE_CHARS} characters")
        return cls.start(ctx, id=project_id(number), number=number, kind=check_kind(kind), title=title,
                         brief=doc(brief, "the brief"), owner_flag=bool(owner_flag))

    def attach_research(self, ctx: Context, title: str, text: str, *, role: str | None) -> None:
        self._at((BRIEF, RESEARCH), "research")
        _role(role, RESEARCHERS, "research")
        if len(self.research) >= MAX_RESEARCH:
            raise Refusal("too_many_documents", f"a project keeps at most {MAX_RESEARCH} research documents")
        title = (title or "research").strip()[:MAX_TITLE_CHARS] if isinstance(title, str) else "research"
        self.record(self.ResearchAttached, ctx, title=title or "research", text=doc(text, "research"))
        if self.stage == BRIEF:
            self._move(ctx, RESEARCH, "research attached")

    def propose(self, ctx: Context, proposal: str, tasks_doc: str, spec: str | None, *, role: str | None) -> int:
        """A new revision of the plan; its number."""
        self._at((BRIEF, *PLANNING), "a proposal")
        _role(role, PLANNERS, "a proposal")
        if not self.research:
            raise Refusal("needs_research", f"project {self.number} has no research yet: researchers attach "
                          "what they found before the planner proposes")
        if len(self.revisions) >= MAX_REVISIONS:
            raise Refusal("too_many_documents", f"a project keeps at most {MAX_REVISIONS} revisions")
        if self.kind == "code" and (not isinstance(spec, str) or not spec.strip()):
            raise Refusal("needs_spec", "a code project's plan needs a spec (the change it makes, as a document)")
        spec = doc(spec, "the spec", required=False)
        n = self.revision + 1
        self.record(self.Proposed, ctx, revision=n, proposal=doc(proposal, "the proposal"),
                    tasks_doc=doc(tasks_doc, "the tasks document"), spec=spec)
        if self.stage == RESEARCH:
            self._move(ctx, PROPOSAL, f"revision {n} proposed")
        elif self.stage == APPROVAL:
            self._move(ctx, CRITIQUE, f"revision {n} needs its own critique")
        self._maybe_ready(ctx)
        return n

    def critique(self, ctx: Context, text: str, revise: bool, *, role: str | None) -> None:
        self._at((PROPOSAL, CRITIQUE, APPROVAL), "a critique")
        if role is not None and role in NOT_CRITICS:
            raise Refusal("wrong_role", f"a {role} does not critique a proposal")
        if ctx.actor == self.author:
            raise Refusal("own_proposal", "agents other than the author critique a proposal")
        if len(self.critiques) >= MAX_CRITIQUES:
            raise Refusal("too_many_documents", f"a project keeps at most {MAX_CRITIQUES} critiques")
        self.record(self.Critiqued, ctx, revision=self.revision, text=doc(text, "a critique"), revise=bool(revise))
        if self.stage == PROPOSAL:
            self._move(ctx, CRITIQUE, f"revision {self.revision} under critique")
        if self.stage == APPROVAL and revise:
            self._move(ctx, CRITIQUE, f"a critique asks for a revision of revision {self.revision}")
        self._maybe_ready(ctx)

    def _maybe_ready(self, ctx: Context) -> None:
        if self.stage == CRITIQUE and self.critique_problem() is None:
            self._move(ctx, APPROVAL, f"revision {self.revision} critiqued, nothing blocks it")

    def send_back(self, ctx: Context) -> None:
        """The owner sends the plan back to the planner (before it is approved)."""
        self._owner(ctx, "sending a project back")
        self._at((PROPOSAL, CRITIQUE, APPROVAL), "sending back")
        self.record(self.SentBack, ctx, revision=self.revision)
        if self.stage != PROPOSAL:
            self._move(ctx, PROPOSAL, "sent back by the owner")

    def flag(self, ctx: Context, on: bool) -> None:
        self._owner(ctx, "flagging a project for the owner's approval")
        self._live()
        if STAGES.index(self.stage) >= STAGES.index(IMPLEMENTATION) or self.mayor_approved is not None:
            raise Refusal("wrong_stage", f"project {self.number}'s plan was already approved")
        if bool(on) == self.owner_flag:
            raise Refusal("no_change", f"project {self.number} is {'already' if on else 'not'} flagged")
        self.record(self.Flagged, ctx, on=bool(on))

    def mayor_approve(self, ctx: Context, *, role: str | None) -> bool:
        """The Mayor's approval of the plan; True when it moved the project on, False when it waits for
        the owner (the command then asks for the owner's approval)."""
        self._live()
        if role != APPROVER:
            raise Refusal("wrong_role", "the Mayor approves the plan (the orchestrator plans, the Mayor approves)"
                          if role == "orchestrator" else f"the Mayor approves the plan; a {role} cannot")
        self._ready_for_approval()
        if self.mayor_approved == self.revision:
            raise Refusal("no_change", f"the Mayor already approved revision {self.revision}")
        if self.kind == "code" and self.revision not in self.specs:
            raise Refusal("spec_not_committed", f"revision {self.revision}'s spec is not in the project's repository "
                          f"yet (the hub commits it as an OpenSpec change in a moment): approve it once it is there")
        self.record(self.MayorApproved, ctx, revision=self.revision)
        if self.owner_flag and not self.owner_approved:
            return False
        self._move(ctx, IMPLEMENTATION, f"revision {self.revision} approved by the Mayor")
        return True

    def _ready_for_approval(self) -> None:
        if self.stage == CRITIQUE:
            blocked = self.sent_back == self.revision or bool(self.blocking())
            raise Refusal("critique_blocks" if blocked else "needs_critique", str(self.critique_problem()))
        if self.stage in (BRIEF, RESEARCH, PROPOSAL):
            raise Refusal("wrong_stage", f"the plan is approved after its critique; project {self.number} is at "
                          f"{self.stage}")
        if self.stage != APPROVAL:
            raise Refusal("wrong_stage", f"project {self.number}'s plan was already approved")

    def asked_owner(self, ctx: Context, approval: str) -> None:
        self.record(self.OwnerAsked, ctx, approval=approval)

    def owner_approve(self, ctx: Context) -> bool:
        """The owner's approval, at any stage; True when it moved the project on (at Approval)."""
        self._owner(ctx, "the owner's approval")
        self._live()
        if self.owner_approved:
            raise Refusal("no_change", f"the owner already approved project {self.number}")
        self.record(self.OwnerApproved, ctx)
        if self.stage == APPROVAL:
            self._move(ctx, IMPLEMENTATION, "approved by the owner")
            return True
        return False

    def veto(self, ctx: Context) -> None:
        self._owner(ctx, "a veto")
        self._live()
        self.record(self.Vetoed, ctx)

    def link_task(self, ctx: Context, task: str, *, role: str | None) -> None:
        self._live()
        _role(role, LINKERS, "linking a task")
        if self.stage != IMPLEMENTATION:
            raise Refusal("plan_not_approved", f"tasks are linked only once the plan is approved; project "
                          f"{self.number} is at {self.stage}")
        if len(self.tasks) >= MAX_TASKS:
            raise Refusal("too_many_documents", f"a project links at most {MAX_TASKS} tasks")
        self.record(self.TaskLinked, ctx, task=task)

    def task_done(self, ctx: Context, task: str) -> None:
        """A linked task passed; the project moves on when every linked task is done."""
        if task not in self.tasks or task in self.done or self.ended:
            return
        self.record(self.TaskDone, ctx, task=task)
        if self.stage == IMPLEMENTATION and set(self.tasks) <= set(self.done):
            self._move(ctx, REVIEW, f"every linked task is done ({len(self.tasks)})")

    def deliver(self, ctx: Context, title: str, text: str, item: Handed | None, *, role: str | None,
                asked: str | None = None) -> None:
        """The deliverable: its document and the Library item it is (``item``, as the Library holds the
        number ``asked`` for; None when it holds none)."""
        self._at((REVIEW,), "the deliverable")
        if role is not None and role in NOT_DELIVERERS:
            raise Refusal("wrong_role", f"a {role} does not attach a project's deliverable")
        title = title.strip()[:MAX_TITLE_CHARS] if isinstance(title, str) else ""
        if not title:
            raise Refusal("bad_title", "a deliverable needs a title")
        if item is None or item.deleted:
            raise Refusal("needs_deliverable", f"project {self.number} is delivered with its deliverable in the "
                          "Library: hand the file in with plaza_library_submit (project " + self.number
                          + ") and name the item" + (f"; the Library holds no item {asked}" if asked else ""))
        if item.project != self.number and (item.task is None or item.task not in self.tasks):
            raise Refusal("not_this_project", f"library item {item.number} was handed in for "
                          f"{item.project or item.task or 'no project'}, not for project {self.number} or its tasks")
        self.record(self.DeliverableAttached, ctx, title=title, text=doc(text, "the deliverable"), item=item.number)
        self._move(ctx, DELIVERED, f"deliverable attached (library item {item.number})")

    def repo_opened(self, ctx: Context, repo: str) -> None:
        if self.repo is not None:
            raise Refusal("no_change", f"project {self.number}'s repository is {self.repo}")
        self.record(self.RepoOpened, ctx, repo=repo)

    def spec_committed(self, ctx: Context, revision: int, path: str, commit: str) -> None:
        """The hub kept revision ``revision`` (a code project's) in the repository as an OpenSpec change."""
        if self.repo is None or self.kind != "code" or not 1 <= revision <= self.revision:
            raise Refusal("invalid_request", f"project {self.number} has no revision {revision} to keep in a repository")
        if revision in self.specs:
            raise Refusal("no_change", f"revision {revision} is in {self.repo} already")
        self.record(self.SpecCommitted, ctx, revision=revision, repo=self.repo, path=path, commit=commit,
                    author=self.revisions[revision - 1]["by"])

    def specs_to_commit(self) -> list[int]:
        """The revisions of a code project whose spec is not in its repository yet."""
        if self.kind != "code" or self.repo is None:
            return []
        return [r["revision"] for r in self.revisions if r["revision"] not in self.specs]

    def threaded(self, ctx: Context, post: str) -> None:
        self.record(self.Threaded, ctx, post=post)

    def _owner(self, ctx: Context, what: str) -> None:
        if ctx.actor != "owner":
            raise Refusal("owner_only", f"{what} is the owner's")


#: How much of a document the project's board thread shows (the project's page has it whole).
THREAD_EXCERPT_CHARS = 600


def _excerpt(text: str) -> str:
    text = text.strip()
    return text if len(text) <= THREAD_EXCERPT_CHARS else text[:THREAD_EXCERPT_CHARS].rstrip() + " ..."


def thread_line(p: Project, e: PlazaAggregate.Event) -> str | None:
    """What the project's board thread says of one of its events (None: nothing). The first, the
    project opened, is the thread's post; every later one a reply to it."""
    n = p.number
    why = f" Why: {e.reason}" if getattr(e, "reason", None) else ""
    if isinstance(e, Project.Created):
        return f"Project {n} opened ({e.kind} project): {e.title}\n\n{_excerpt(e.brief)}"
    if isinstance(e, Project.Moved):
        return f"Project {n} moved from {e.source} to {e.stage}: {e.why}."
    if isinstance(e, Project.ResearchAttached):
        return f"Research on {n}: {e.title}\n\n{_excerpt(e.text)}"
    if isinstance(e, Project.Proposed):
        return f"Revision {e.revision} of {n}'s plan\n\n{_excerpt(e.proposal)}"
    if isinstance(e, Project.Critiqued):
        asks = "asks for a revision" if e.revise else "asks for no revision"
        return f"Critique of revision {e.revision} of {n} ({asks})\n\n{_excerpt(e.text)}"
    if isinstance(e, Project.MayorApproved):
        return f"The Mayor approved revision {e.revision} of {n}'s plan."
    if isinstance(e, Project.OwnerAsked):
        return f"Project {n} waits for the owner's approval ({e.approval})."
    if isinstance(e, Project.OwnerApproved):
        return f"The owner approved project {n}.{why}"
    if isinstance(e, Project.SentBack):
        return f"The owner sent revision {e.revision} of {n}'s plan back to the planner.{why}"
    if isinstance(e, Project.Flagged):
        return f"The owner {'flagged' if e.on else 'unflagged'} project {n} for the owner's approval."
    if isinstance(e, Project.TaskLinked):
        return f"Task {e.task} linked to project {n}."
    if isinstance(e, Project.TaskDone):
        return f"Task {e.task} of project {n} is done."
    if isinstance(e, Project.DeliverableAttached):
        return f"Deliverable of {n}: {e.title} (library item {e.item})\n\n{_excerpt(e.text)}"
    if isinstance(e, Project.RepoOpened):
        return f"Project {n}'s repository: {e.repo} on the plaza's git server."
    if isinstance(e, Project.SpecCommitted):
        return f"Revision {e.revision} of {n}'s spec is in {e.repo} at {e.path} (commit {e.commit[:12]})."
    if isinstance(e, Project.Vetoed):
        return f"The owner vetoed project {n}; a veto is final.{why}"
    return None
