-- wrk script that makes each request as it sends it, as a person load-testing the service by
-- hand writes one (bench/defaults_ab.py): `create` posts a new Luhn-valid card with metadata
-- each time; `get` reads a stored token picked at random from a file of ids (one a line);
-- `list` reads a page of 50 tokens filtered by a customer picked at random among the loaded
-- ones (the data set loads 50 tokens a customer; the creates of a run add tokens to the same
-- customers, so a page stays full). Arguments after `--`: the mode, then `create <first number>`,
-- `get <ids file> <seed>` or `list <customers> <seed>`.
-- Prints the same JSON summary as wrk_pool.lua.
local common = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./") ..
                      "wrk_common.lua")
local key = os.getenv("BENCH_KEY")
local counter = 0

function setup(thread)
  thread:set("tid", counter)
  counter = counter + 1
end

local mode
local ids = {}
local hi, lo = 0, 0
local customers = 1
local headers

local REGIONS = common.REGIONS

local luhn = common.luhn

function init(args)
  mode = args[1]
  headers = {["SVC-API-KEY"] = key}
  if mode == "create" then
    headers["Content-Type"] = "application/json"
    -- 15 digits (5, the thread, then 13 from a counter that starts at the given number), then
    -- the Luhn check digit.
    hi = tonumber(args[2]) + tid * 1000
    lo = 0
  elseif mode == "get" then
    local f = assert(io.open(args[2], "r"))
    for line in f:lines() do
      if line ~= "" then ids[#ids + 1] = line end
    end
    f:close()
    math.randomseed(tonumber(args[3]) + tid)
  elseif mode == "list" then
    customers = tonumber(args[2])
    math.randomseed(tonumber(args[3]) + tid)
  else
    error("mode must be create, get or list")
  end
end

function request()
  if mode == "get" then
    return wrk.format("GET", "/tokens/" .. ids[math.random(#ids)], headers)
  elseif mode == "list" then
    return wrk.format("GET", string.format("/tokens?metadata.customer_id=cus_%07d&size=50",
                                           math.random(customers) - 1), headers)
  end
  lo = lo + 1
  if lo >= 10000000 then
    lo = 0
    hi = hi + 1
  end
  local n = hi * 10000000 + lo
  local number = luhn(string.format("5%d%06d%07d", tid % 10, hi % 1000000, lo))
  local body = string.format(
    '{"type":"card","data":{"number":"%s","expiration_month":%d,"expiration_year":%d,' ..
    '"cvc":"%03d"},"metadata":{"customer_id":"cus_%07d","region":"%s"}}',
    number, 1 + n % 12, 2027 + n % 5, n % 1000, math.floor(n / 50) % 10000000,
    REGIONS[1 + n % 8])
  return wrk.format("POST", "/tokens", headers, body)
end

done = common.done
