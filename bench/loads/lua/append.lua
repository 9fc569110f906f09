-- wrk script: every connection POSTs the same append body to its own generation.
--
-- Run with as many threads as connections (`wrk -tN -cN`), so thread i holds exactly one
-- connection and appends to generation i: no two in-flight requests ever share a
-- generation (on PostgreSQL they would queue on its row lock, which is not what an MCP
-- server's streams do). Arguments after `--`: the body file, then one generation token
-- per thread. `done` prints one JSON line (prefixed `WRK_JSON `) for bench/wrkload.py.

local counter = 0
local tokens = nil

function setup(thread)
   counter = counter + 1
   thread:set("index", counter)
end

function init(args)
   local file = assert(io.open(args[1], "rb"))
   local body = file:read("*a")
   file:close()
   local token = args[1 + index]
   assert(token, "no generation token for thread " .. tostring(index))
   wrk.method = "POST"
   wrk.body = body
   wrk.headers["Content-Type"] = "application/json"
   wrk.path = "/v1/generations/" .. token .. "/events"
   -- The request never changes: format it once, not per request.
   req = wrk.format()
end

function request()
   return req
end

function done(summary, latency, requests)
   local e = summary.errors
   io.write(string.format(
      'WRK_JSON {"requests":%d,"duration_us":%d,"bytes":%d,' ..
      '"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},' ..
      '"latency_us":{"min":%d,"max":%d,"mean":%.1f,"p50":%d,"p90":%d,"p99":%d}}\n',
      summary.requests, summary.duration, summary.bytes,
      e.connect, e.read, e.write, e.status, e.timeout,
      latency.min, latency.max, latency.mean,
      latency:percentile(50), latency:percentile(90), latency:percentile(99)))
end
