"""An MCP server (official Python SDK `mcp` 2.3, streamable HTTP) whose `slow_compute` calls
are durable tasks in the event log: any replica answers `tasks/get|update|cancel` for them.

    EVENTLOG_URL=http://127.0.0.1:8080 python tasks_server.py --port 8000
"""

import argparse
import asyncio

from mcp.server.mcpserver import MCPServer
from mcp_eventlog_client.mcp import EventLogTasks, current_task_run
from mcp_eventlog_client.task_runner import TaskRunner
from mcp_eventlog_client.tasks import TaskClient

tasks = EventLogTasks(TaskRunner(TaskClient(), lease_seconds=30), tools={"slow_compute"})
server = MCPServer("compute", extensions=[tasks])


@server.tool()
async def slow_compute(n: int) -> str:
    run = current_task_run()  # the task's TaskRun, or None for a synchronous call
    for step in range(1, 4):
        await asyncio.sleep(0.1)
        if run is not None:
            await run.progress({"progress": step, "total": 3})
    return str(n * 2)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=8000)
    port = parser.parse_args().port
    server.run("streamable-http", host="127.0.0.1", port=port, stateless_http=True)
