"""Planning: the `create_execution_plan` tool, and the executor that runs a plan's tasks.

    plan_tool    the tool and its arguments' schema (checked by `validation`)
    validation   what makes a plan valid at a level
    references   `{{t1.data.x}}` in a task's arguments, resolved before it runs
    lifecycle    the plan in the graph's state: made, revised, its tasks' outcomes, its end
    plan_call    a plan call's acceptance by the tools node
    executor     the router, the plan-task node and the plan's end node
    report       what the model and the person hear when a plan's run ends

Nothing is imported here: the graph's state imports `lifecycle`, which the
executor's modules import in turn.
"""
