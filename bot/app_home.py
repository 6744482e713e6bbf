"""Block Kit for Galley's App Home tab: pure functions from `core.api.home.HomeModel` to a
`home` view (a plain dict), no I/O.

Approvers see the drafts waiting for them (each linked to its review message); everyone
sees each recipe's queue against `pending_limit`, paused state, next slot and last
outcome; admins also get the runs that need a person and the buttons `/galley` offers
them. A view never exceeds Block Kit's 100 blocks: past that, lists are summarised.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from bot.digest_text import best_post_text
from bot.mrkdwn import escape_mrkdwn, mrkdwn_object
from bot.review_facts import published_line
from core.api.calendar import CalendarEntry
from core.api.home import HomeModel, RecipeLine, RunNeedingPerson, WaitingDraft
from core.api.week import WeekDay, entry_text
from core.publishing.engagement import gone_text

VIEW_BLOCK_LIMIT = 100
WEEK_LINES = 20  # a day's lines shown; a section holds 3,000 characters
ACTION_HOME_PAUSE = "galley_home_pause"
ACTION_HOME_RESUME = "galley_home_resume"
ACTION_HOME_RUN = "galley_home_run"
ACTION_HOME_BUMP = "galley_home_bump"
ACTION_HOME_PUBLISHED = "galley_home_mark_published"
ACTION_HOME_RETRY = "galley_home_retry"
ACTION_HOME_CANCEL = "galley_home_cancel"
# a Home button -> the `/galley` words it stands for (the value completes them)
HOME_COMMANDS = {
    ACTION_HOME_PAUSE: "pause",
    ACTION_HOME_RESUME: "resume",
    ACTION_HOME_RUN: "run",
    ACTION_HOME_BUMP: "bump",
    ACTION_HOME_PUBLISHED: "resolve {} published",
    ACTION_HOME_RETRY: "retry",
    ACTION_HOME_CANCEL: "cancel",
}
Block = dict[str, Any]


@dataclass(frozen=True)
class Viewer:
    user: str
    approver: bool
    admin: bool
    recipes: frozenset[str] = frozenset()  # the recipes whose drafts they may decide


@dataclass
class _Part:
    """One list on the Home tab: its heading, one block group per item, and how to say
    how many items were left out."""

    heading: list[Block]
    items: list[list[Block]]
    more: str  # "{n} more …"
    hidden: int = 0
    empty: list[Block] = field(default_factory=list)

    def blocks(self) -> list[Block]:
        shown = [b for item in self.items for b in item] or self.empty
        summary = [_context(self.more.format(n=self.hidden))] if self.hidden else []
        return self.heading + shown + summary


def command_words(action_id: str, value: str) -> str:
    """The `/galley` text a Home button stands for."""
    words = HOME_COMMANDS[action_id]
    return words.format(value) if "{}" in words else f"{words} {value}"


def home_view(
    model: HomeModel,
    viewer: Viewer,
    *,
    now: datetime,
    workspace_url: str | None = None,
    notice: str | None = None,
) -> dict[str, Any]:
    """The Home tab for `viewer`; `notice` is the answer to their last button, if any."""
    top = [{"type": "header", "text": _plain("Galley")}]
    if notice:
        top.append(_section(notice))
    parts = [
        _waiting_part(model, viewer, workspace_url),
        _week_part(model, viewer) if model.week is not None else _coming_up_part(model),
        _published_part(model),
        _recipes_part(model, viewer),
    ]
    if viewer.admin:
        parts.append(_needing_part(model))
    footer = [_context(f"Updated {_date(now)} · `/galley help` for every command")]
    blocks = _fit(top, parts, footer)
    return {"type": "home", "callback_id": "galley_home", "blocks": blocks}


def _fit(top: list[Block], parts: list[_Part], footer: list[Block]) -> list[Block]:
    """Drop items from the longest list, counting them, until the view fits."""

    def assembled() -> list[Block]:
        middle = [b for part in parts for b in [_divider(), *part.blocks()]]
        return top + middle + footer

    blocks = assembled()
    while len(blocks) > VIEW_BLOCK_LIMIT:
        longest = max(parts, key=lambda p: sum(len(i) for i in p.items))
        if not longest.items:
            break
        longest.items.pop()
        longest.hidden += 1
        blocks = assembled()
    return blocks


def _waiting_part(model: HomeModel, viewer: Viewer, workspace_url: str | None) -> _Part:
    if not viewer.approver:
        return _Part(
            [_section("*Drafts waiting for review*")],
            [],
            "",
            empty=[
                _context(
                    f"{model.waiting_total} waiting. You are not one of Galley's approvers, "
                    "so none of them waits for your decision."
                )
            ],
        )
    items = [[_section(_waiting_line(d, workspace_url))] for d in model.waiting]
    heading = [_section(f"*Waiting for your decision* ({model.waiting_total})")]
    hidden = model.waiting_total - len(model.waiting)
    return _Part(
        heading,
        items,
        "…and {n} more in the review channel, oldest first above.",
        hidden=hidden,
        empty=[_context("Nothing waits for you.")],
    )


def _waiting_line(draft: WaitingDraft, workspace_url: str | None) -> str:
    ready = f" · ready {_date(draft.ready_at)}" if draft.ready_at else ""
    run = escape_mrkdwn(draft.run_id)
    line = f"*{escape_mrkdwn(draft.recipe)}* · `{run}` · revision {draft.revision}{ready}"
    if draft.review_channel and draft.review_ts:
        if workspace_url:
            link = _permalink(workspace_url, draft.review_channel, draft.review_ts)
            return f"{line}\n<{link}|Open the review message>"
        return f"{line}\nIn <#{draft.review_channel}>"
    return f"{line}\n_Not posted for review yet._"


def _coming_up_part(model: HomeModel) -> _Part:
    """The publication calendar's next slots, per recipe and target (docs/design.md §23)."""
    items = [[_context(_coming_up_line(entry))] for entry in model.coming_up]
    return _Part(
        [_section("*Coming up*")],
        items,
        "…and {n} more: `galley calendar` lists them all.",
        empty=[_context("Nothing scheduled in the next week.")],
    )


def _coming_up_line(entry: CalendarEntry) -> str:
    target = f" → {escape_mrkdwn(entry.target)}" if entry.target else ""
    recipe, shown = escape_mrkdwn(entry.recipe), escape_mrkdwn(entry.shown)
    item = f" · {escape_mrkdwn(entry.item)}" if entry.item else ""  # docs/design.md §29
    return f"{_date(entry.slot_at)} · *{recipe}*{target}{item} · {shown}"


def _week_part(model: HomeModel, viewer: Viewer) -> _Part:
    """The week at a glance (docs/design.md §36): what needs the viewer's approval first,
    then each day's slots and planned posts, then the items waiting."""
    week = model.week
    assert week is not None
    heading = [_section(f"*The week* (times in {escape_mrkdwn(week.zone)})")]
    first = [e for e in week.waiting_for_review() if e.recipe in viewer.recipes]
    if first:
        lines = [_week_line(e, week.zone) for e in first[:WEEK_LINES]]
        heading.append(_section("*Needs your approval first*\n" + "\n".join(lines)))
    items = [[_day_block(day, week.zone)] for day in week.days]
    items += [
        [_context(_items_text(w.recipe, w.count, w.oldest), f"week-items:{w.recipe}")]
        for w in week.items_waiting
    ]
    return _Part(heading, items, "…and {n} more: `galley calendar` lists them all.")


def _day_block(day: WeekDay, zone: str) -> Block:
    lines = [_week_line(e, zone) for e in day.entries[:WEEK_LINES]]
    if len(day.entries) > WEEK_LINES:
        lines.append(f"…and {len(day.entries) - WEEK_LINES} more: `galley calendar`")
    text = f"*{day.day:%a %d %b}*\n" + ("\n".join(lines) or "_nothing planned_")
    return _section(text) | {"block_id": f"week:{day.day.isoformat()}"}


def _week_line(entry: CalendarEntry, zone: str) -> str:
    return escape_mrkdwn(entry_text(entry, zone))


def _items_text(recipe: str, count: int, oldest: tuple[str, ...]) -> str:
    titles = "; ".join(escape_mrkdwn(t) for t in oldest)
    more = "…" if count > len(oldest) else ""
    return f"*{escape_mrkdwn(recipe)}*: {count} item(s) found, not drafted yet: {titles}{more}"


def _published_part(model: HomeModel) -> _Part:
    """After publication (docs/design.md §28): posts gone once published, then the
    week's best post."""
    items = [[_section(f":warning: {escape_mrkdwn(gone_text(post))}")] for post in model.gone]
    if model.best_post is not None:
        items.append([_context(f"Best post this week: {best_post_text(model.best_post)}")])
    # docs/design.md §38: each recipe's week in a line; `galley report` says the rest
    items += [[_context(escape_mrkdwn(row.summary()))] for row in model.report]
    return _Part(
        [_section("*Published this week*")],
        items,
        "…and {n} more: `galley stats --days 7` lists them all.",
        empty=[_context("No readings yet this week.")],
    )


def _recipes_part(model: HomeModel, viewer: Viewer) -> _Part:
    items = []
    for line in model.recipes:
        item = [_section(_recipe_text(line))]
        if viewer.admin:
            item.append(_recipe_buttons(line))
        items.append(item)
    return _Part(
        [_section("*Recipes*")],
        items,
        "…and {n} more recipes: `/galley status` lists them all.",
        empty=[_context("No recipes.")],
    )


def _recipe_text(line: RecipeLine) -> str:
    s = line.status
    queue = f"{s.pending}/{s.pending_limit} waiting"
    if s.pending >= s.pending_limit:
        queue += " (full: drafting waits for reviews)"
    parts = [f"*{escape_mrkdwn(s.name)}* v{s.version}", queue]
    if s.in_batch:
        parts.append(f"{s.in_batch} drafting in a batch")
    if s.paused:
        parts.append(f"paused ({escape_mrkdwn(s.paused_reason or 'no reason given')})")
    if s.next_slot:
        parts.append(f"next {_date(datetime.fromisoformat(s.next_slot))}")
    text = " · ".join(parts)
    if s.last_poll:  # docs/design.md §29: a failure's answer quotes a server
        text += f"\nLast poll: {escape_mrkdwn(s.last_poll)}"
    if line.last_run:
        why = f" ({escape_mrkdwn(line.last_reason)})" if line.last_reason else ""
        text += f"\nLast run `{escape_mrkdwn(line.last_run)}`: {line.last_state}{why}"
    if line.last_item is not None:  # docs/design.md §29: feed text is untrusted
        link = f" {escape_mrkdwn(line.last_item.link)}" if line.last_item.link else ""
        text += f"\nItem: {escape_mrkdwn(line.last_item.title)}{link}"
    if line.last_published:
        text += "\n" + published_line(line.last_published)
    return text


def _recipe_buttons(line: RecipeLine) -> Block:
    name = line.status.name
    toggle = (
        _button("Resume", ACTION_HOME_RESUME, name, "primary")
        if line.status.paused
        else _button("Pause", ACTION_HOME_PAUSE, name)
    )
    bump = _button("Bump", ACTION_HOME_BUMP, name) | {
        "confirm": _confirm(
            f"Bump {name}?",
            "A new version may draft the slots that already have a draft. Older drafts "
            "still waiting are superseded.",
            "Bump",
        )
    }
    return {
        "type": "actions",
        "block_id": f"home_recipe:{name}",
        "elements": [toggle, _button("Run now", ACTION_HOME_RUN, name), bump],
    }


def _needing_part(model: HomeModel) -> _Part:
    items = [[_section(_run_text(run)), _run_buttons(run)] for run in model.needing_person]
    return _Part(
        [_section(f"*Runs needing a person* ({len(model.needing_person)})")],
        items,
        "…and {n} more: `/galley runs uncertain` lists them.",
        empty=[_context("None: nothing is uncertain or stuck.")],
    )


def _run_text(run: RunNeedingPerson) -> str:
    what = "stuck " if run.stuck else ""
    why = f" ({escape_mrkdwn(run.reason)})" if run.reason else ""
    return f"`{escape_mrkdwn(run.id)}` {what}{run.state}{why} since {_date(run.since)}"


def _run_buttons(run: RunNeedingPerson) -> Block:
    elements = []
    if run.state == "uncertain":
        elements.append(_button("Mark published", ACTION_HOME_PUBLISHED, run.id, "primary"))
    elements += [
        _button("Retry", ACTION_HOME_RETRY, run.id),
        _button("Cancel", ACTION_HOME_CANCEL, run.id, "danger"),
    ]
    return {"type": "actions", "block_id": f"home_run:{run.id}"[:255], "elements": elements}


def _permalink(workspace_url: str, channel: str, ts: str) -> str:
    return f"{workspace_url.rstrip('/')}/archives/{channel}/p{ts.replace('.', '')}"


def _date(moment: datetime) -> str:
    fallback = moment.isoformat(timespec="minutes")
    return f"<!date^{int(moment.timestamp())}^{{date_short_pretty}} {{time}}|{fallback}>"


def _confirm(title: str, text: str, confirm: str) -> Block:
    return {
        "title": _plain(title),
        "text": mrkdwn_object(text),
        "confirm": _plain(confirm),
        "deny": _plain("Cancel"),
    }


def _button(text: str, action_id: str, value: str, style: str | None = None) -> Block:
    button = {"type": "button", "text": _plain(text), "action_id": action_id, "value": value}
    return button | ({"style": style} if style else {})


def _section(mrkdwn: str) -> Block:
    return {"type": "section", "text": mrkdwn_object(mrkdwn[:3000])}


def _context(mrkdwn: str, block_id: str | None = None) -> Block:
    block: Block = {"type": "context", "elements": [mrkdwn_object(mrkdwn)]}
    return block | ({"block_id": block_id[:255]} if block_id else {})


def _divider() -> Block:
    return {"type": "divider"}


def _plain(text: str) -> Block:
    return {"type": "plain_text", "text": text, "emoji": True}
