"""The personal assistant: an agent over its own email and task tools."""

from orchestrator.tools import AgentTool


class PersonalAssistantAgent(AgentTool):
    """Delegates to task_agent, calendar_agent and email_agent, found in its own src/sub_graphs/."""

    instructions = (
        "You are {name}, an agent that {description}. Another assistant hands you requests "
        "in plain words. Keep the to-do list with your task tools, the calendar with your "
        "calendar tools, and send email with your email tool; never invent an email address "
        "or an event's uid. Reply with a short report of what you did, with task ids, event "
        "uids and any failures."
    )
