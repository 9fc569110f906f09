"""The pipelines of an `EventLogEventStore` that still hold events the service has not
acknowledged: a replay waits for its generation's, `aclose` for all of them."""

from __future__ import annotations

from collections import OrderedDict

from mcp.server.streamable_http import StreamId

from mcp_eventlog_client.pipeline import GenerationPipeline


def _settled(pipeline: GenerationPipeline) -> bool:
    return pipeline.unacknowledged == 0 or pipeline.error is not None


class StorePipelines:
    """The pipelines with events not yet acknowledged, or still written, by token; and the
    pipelines of request streams that ended with events unacknowledged, by SDK stream.

    A new generation of the same SDK stream (a reused request id) is opened only once the
    ended one's events are stored, or the new generation would fence them out. Bounded like
    the streams (the oldest is forgotten first).
    """

    def __init__(self, bound: int) -> None:
        self._by_token: OrderedDict[str, GenerationPipeline] = OrderedDict()
        self._finishing: dict[tuple[str, StreamId], GenerationPipeline] = {}
        self._bound = bound

    def add(self, pipeline: GenerationPipeline) -> None:
        """A pipeline of a generation just opened."""
        self._by_token[pipeline.generation] = pipeline
        self.prune()

    def finishing(self, key: tuple[str, StreamId], pipeline: GenerationPipeline) -> None:
        """The request stream `key` ended with `pipeline` still unacknowledged."""
        self._finishing[key] = pipeline

    async def settle_finishing(self, key: tuple[str, StreamId], within: float) -> None:
        """Wait (up to `within`) for what the ended request stream `key` handed out."""
        previous = self._finishing.pop(key, None)
        if previous is not None:
            await previous.settle(within=within)

    def prune(self) -> None:
        """Forget finished pipelines once acknowledged (or broken), and the oldest past
        the bound."""
        for token, pipeline in list(self._by_token.items()):
            if pipeline.finished and _settled(pipeline):
                del self._by_token[token]
        while len(self._by_token) > self._bound:
            self._by_token.popitem(last=False)
        for key, pipeline in list(self._finishing.items()):
            if _settled(pipeline):
                del self._finishing[key]

    async def settle(self, token: str, within: float) -> None:
        """Wait (up to `within`) until every event handed out of generation `token` is
        acknowledged."""
        pipeline = self._by_token.get(token)
        if pipeline is not None:
            await pipeline.settle(within=within)

    async def aclose(self, settle_seconds: float) -> None:
        """Wait up to `settle_seconds` for each pipeline's events, then close it."""
        for pipeline in list(self._by_token.values()):
            await pipeline.settle(within=settle_seconds)
            await pipeline.aclose()
        self._by_token.clear()
