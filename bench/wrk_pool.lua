-- wrk script: cycle through a pool of prepared requests (one a line: method, path, content
-- type, body, tab-separated), each thread starting at its own offset; print a JSON summary.
local common = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./") ..
                      "wrk_common.lua")
local key = os.getenv("BENCH_KEY")
local counter = 0
local threads = {}

function setup(thread)
  thread:set("tid", counter)
  counter = counter + 1
  table.insert(threads, thread)
end

local reqs = {}
local idx = 1

function init(args)
  local f = assert(io.open(args[1], "r"))
  for line in f:lines() do
    local m, p, ct, b = line:match("^([^\t]*)\t([^\t]*)\t([^\t]*)\t(.*)$")
    local headers = {["SVC-API-KEY"] = key}
    if ct ~= "" then headers["Content-Type"] = ct end
    if b == "" then b = nil end
    reqs[#reqs + 1] = wrk.format(m, p, headers, b)
  end
  f:close()
  idx = 1 + (tid * 7919) % #reqs
end

-- BENCH_THREAD_RATE > 0: this thread sends at most that many requests a second, on a schedule
-- its connections share (bench/loadgen.py's Pacer, in Lua): `delay()` gives each request the
-- next free slot. wrk has no wall clock for Lua; LuaJIT's ffi reads CLOCK_MONOTONIC.
local rate = tonumber(os.getenv("BENCH_THREAD_RATE") or "0") or 0
if rate > 0 then
  local ffi = require("ffi")
  ffi.cdef[[
    typedef struct { long tv_sec; long tv_nsec; } bench_timespec;
    int clock_gettime(int clk_id, bench_timespec *tp);
  ]]
  local ts = ffi.new("bench_timespec")
  local function now_ms()
    ffi.C.clock_gettime(1, ts)  -- CLOCK_MONOTONIC
    return tonumber(ts.tv_sec) * 1000 + tonumber(ts.tv_nsec) / 1e6
  end
  local interval, next_slot = 1000 / rate, nil

  function delay()
    local now = now_ms()
    local slot = math.max(now, next_slot or now)
    next_slot = slot + interval
    return math.floor(slot - now)
  end
end

function request()
  local r = reqs[idx]
  idx = idx + 1
  if idx > #reqs then idx = 1 end
  return r
end

done = common.done
