/**
 * The replaying half of `EventLogEventStore`: `replayEventsAfter` asks the service for a
 * verdict and sends the missed messages in order, across pages, or fails the client's
 * request(s) visibly (`RESUME_REFUSED`). Nothing of another session is ever sent. The store's
 * class comment has the promises.
 */

import type { EventLogClient } from "./client.js";
import { MessageAssembler } from "./encoding.js";
import { DeadlineExceeded } from "./errors.js";
import type { ResumeAnswer } from "./models.js";
import {
  CROSS_SESSION,
  MALFORMED,
  NOT_STORED,
  type Refusal,
  refusalMessage,
  refusalOf,
  ResumeRefused,
  SHARED_STORE,
} from "./refusal.js";
import type { McpMessage, SendEvent as Send, StreamId } from "./sdk.js";
import { randomKey, type SessionBook, tokenOf, UNSTORED_PREFIX } from "./store-session.js";
import { GET_STREAM } from "./transport.js";

/** The stream a refused resume's connection is registered under: nothing is ever sent to it. */
const REFUSED_STREAM_PREFIX = "eventlog:refused:";

/** Answers the SDK's `replayEventsAfter` for one session (see the module). */
export class StoreReplay {
  constructor(
    private readonly client: EventLogClient,
    private readonly book: SessionBook,
    private readonly pageLimit: number | undefined,
    private readonly replayTimeoutMs: number,
  ) {}

  /** Resume after `lastEventId` if, and only if, it may; the stream the connection is on. */
  async decide(lastEventId: string, send: Send): Promise<StreamId> {
    const book = this.book;
    if (book.initializations > 1) {
      return this.refuse(lastEventId, undefined, SHARED_STORE, send);
    }
    if (lastEventId.startsWith(UNSTORED_PREFIX)) {
      return this.refuse(lastEventId, book.unstored.peek(lastEventId), NOT_STORED, send);
    }
    const token = tokenOf(lastEventId);
    if (token === undefined) return this.refuse(lastEventId, undefined, MALFORMED, send);
    const owner = book.owners.get(token);
    if (owner?.broken) return this.refuse(lastEventId, owner.sdkStream, NOT_STORED, send);
    // Hold the stream while replaying: a message stored meanwhile waits, and reaches the
    // client live on the resumed connection, which the SDK registers as soon as this returns.
    const release = owner === undefined ? undefined : await book.state(owner.sdkStream).acquire();
    try {
      const pipe = owner === undefined ? undefined : book.state(owner.sdkStream).pipe;
      if (owner !== undefined && pipe?.generation === token) {
        // What this process handed out of the generation is acknowledged before the service
        // is asked, so the verdict covers every id the client may hold.
        if (!(await pipe.settle(pipe.handed, AbortSignal.timeout(this.replayTimeoutMs)))) {
          const why =
            pipe.error ??
            new DeadlineExceeded(
              0,
              DeadlineExceeded.code,
              "the messages handed out were not acknowledged in time",
            );
          const refusal = owner.broken || pipe.error !== undefined ? NOT_STORED : refusalOf(why);
          return await this.refuse(lastEventId, owner.sdkStream, refusal, send);
        }
      }
      return await this.replay(lastEventId, owner?.sdkStream, release !== undefined, send);
    } finally {
      release?.();
    }
  }

  private async replay(
    lastEventId: string,
    ownStream: StreamId | undefined,
    held: boolean,
    send: Send,
  ): Promise<StreamId> {
    const { names, scope } = this.book;
    const signal = AbortSignal.timeout(this.replayTimeoutMs);
    let answer: ResumeAnswer;
    try {
      const streamId = ownStream === undefined ? undefined : await names.name(scope, ownStream);
      answer = await this.client.resume(lastEventId, {
        streamId,
        limit: this.pageLimit,
        signal,
      });
    } catch (error) {
      return this.refuse(lastEventId, ownStream, refusalOf(error), send);
    }
    const named = answer.streamId === null ? undefined : names.parse(answer.streamId);
    const mine = named?.scope === scope ? named.sdkStream : undefined;
    const sdkStream = ownStream ?? mine;
    if (ownStream === undefined && answer.streamId !== null && mine === undefined) {
      // A real token of another session (or of a stream no store of ours wrote): whatever
      // the verdict, this session may not see it.
      return this.refuse(lastEventId, undefined, CROSS_SESSION, send);
    }
    if (answer.verdict !== "resume" || sdkStream === undefined || answer.generation === null) {
      return this.refuse(lastEventId, sdkStream, answer, send);
    }
    if (held) return this.deliver(lastEventId, sdkStream, answer, false, send, signal);
    const release = await this.book.state(sdkStream).acquire();
    try {
      return await this.deliver(lastEventId, sdkStream, answer, true, send, signal);
    } finally {
      release();
    }
  }

  /** Send a resume's events, page after page; `catchUp`: the stream was not held while the
   *  verdict was asked, so read on past the answer's last page once more. */
  private async deliver(
    lastEventId: string,
    sdkStream: StreamId,
    answer: ResumeAnswer,
    catchUp: boolean,
    send: Send,
    signal: AbortSignal,
  ): Promise<StreamId> {
    const stats = this.book.stats;
    const assembler = new MessageAssembler();
    let sent = 0;
    let lastSeq = Number(lastEventId.slice(lastEventId.lastIndexOf(":") + 1));
    const emit = async (event: (typeof answer.events)[number]): Promise<void> => {
      lastSeq = event.seq;
      const replayed = assembler.push(event);
      if (replayed === undefined) return;
      await send(replayed.id, replayed.message as McpMessage);
      sent += 1;
    };
    try {
      for (const event of answer.events) await emit(event);
      const next = answer.nextAfter ?? (catchUp ? lastSeq : null);
      if (next !== null) {
        const generation = answer.generation ?? "";
        const pages = this.client.eventsAfter(generation, next, { limit: this.pageLimit, signal });
        for await (const event of pages) await emit(event);
      }
    } catch (error) {
      // What was sent is a true prefix; fail the request rather than leave it with a hole.
      stats.replayedMessages += sent;
      return this.refuse(lastEventId, sdkStream, refusalOf(error), send);
    }
    stats.resumed += 1;
    stats.replayedMessages += sent;
    return sdkStream;
  }

  /** Fail the client's request(s) on `sdkStream` visibly: each with its own id, or, when no
   *  request can be named, one error without an id (see the store). */
  private async refuse(
    lastEventId: string,
    sdkStream: StreamId | undefined,
    refusal: Refusal,
    send: Send,
  ): Promise<StreamId> {
    const { logger, transport } = this.book;
    this.book.stats.refused += 1;
    const what = `not resuming ${JSON.stringify(lastEventId)}: ${refusal.verdict}/${refusal.reason} (${refusal.detail})`;
    const requests = sdkStream === undefined ? [] : this.book.requestsOf(sdkStream);
    if (requests.length === 0) {
      const why =
        sdkStream === undefined || sdkStream === GET_STREAM || transport?.knowsRequests
          ? ""
          : "; attach the store to its transport (store.attach(transport)) so a refusal can name the request";
      logger.warn(`mcp-eventlog: ${what}; no request to name, sent without an id${why}`);
      transport?.report(new ResumeRefused(lastEventId, refusal));
      // No event id: the refusal is not stored and never becomes a Last-Event-ID.
      await send("", refusalMessage(undefined, refusal));
    } else {
      logger.info(`mcp-eventlog: ${what}`);
      for (const id of requests) await send("", refusalMessage(id, refusal));
    }
    return REFUSED_STREAM_PREFIX + randomKey();
  }
}
