"""The note that a level's system prompt and tool schemas leave its conversation too little room.

Compaction can shrink only the conversation: when what every call sends anyway
takes most of the window, the person is told once a session what takes it and
what to change, instead of seeing compactions that cannot help.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

FIXED_SHARE = 0.5  # of the window: past it, the system prompt and tool schemas leave too little
MAX_SESSIONS = 10_000  # sessions remembered as told; past it the memory starts again


@dataclass(frozen=True, slots=True)
class WindowUse:
    """What a level's every call takes of its window before any conversation, in tokens."""

    window: int
    system: int
    tools: int
    tool_count: int
    from_profile: bool  # the window is the model profile's, not a setting's

    @property
    def fixed(self) -> int:
        """Tokens sent with every call, which compaction cannot shrink."""
        return self.system + self.tools

    def crowded(self, *, correction: float = 1.0) -> bool:
        """Whether they take more than `FIXED_SHARE` of the window (counted as the server counts)."""
        return self.fixed * correction > FIXED_SHARE * self.window

    def line(self, *, agent_path: Sequence[str] = ()) -> str:
        """One line for the person: what takes the window, and what to change at this level."""
        where = f"context of {' > '.join(agent_path)}" if agent_path else "context"
        folders = (
            f"fewer tool folders under {agent_path[-1]}"
            if agent_path
            else "fewer tool folders at the top of sub_graphs/ (an agent folder can hold several)"
        )
        if self.from_profile:
            larger = f"a model with a larger window (this one's profile gives {self.window:,})"
        elif agent_path:
            larger = f"a larger window (`llm: {{context_tokens: N}}` in {agent_path[-1]}'s tool_config.yaml)"
        else:
            larger = "a larger window (ORCHESTRATOR_CONTEXT_TOKENS, as far as the model takes)"
        share = round(100 * self.fixed / self.window)
        return (
            f"{where}: the system prompt ({self.system:,} tokens) and {self.tool_count} tools' schemas "
            f"({self.tools:,} tokens) take {share}% of the model's {self.window:,}-token window, "
            f"leaving the conversation little room and compaction little to gain: "
            f"approve {folders}, or use {larger}"
        )


@dataclass
class Told:
    """The sessions told already, so that the note comes once a session, not once a call.

    Kept by the level's middleware, which every session of the process shares:
    a nested agent's state begins anew with each call of it, so its state
    could not remember.
    """

    sessions: set[str] = field(default_factory=set)

    def first_time(self, session: str) -> bool:
        """True once for `session`; False every time after."""
        if session in self.sessions:
            return False
        if len(self.sessions) >= MAX_SESSIONS:  # a long-running server: a session may hear it twice
            self.sessions.clear()
        self.sessions.add(session)
        return True
