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

function request()
  local r = reqs[idx]
  idx = idx + 1
  if idx > #reqs then idx = 1 end
  return r
end

done = common.done
