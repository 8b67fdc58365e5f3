-- wrk script for the peer comparison (bench/peer.py): the requests of bench/wrk_each.lua, in
-- allisson/secrets' tokenization API, each made as it is sent. `create` tokenizes a new
-- Luhn-valid card number (base64, as the API takes it) with the same metadata as
-- wrk_each.lua's; `get` detokenizes a stored token picked at random from a file (one a line).
-- Arguments after `--`: `create <key name> <first number>` or `get <ids file> <seed>`; the
-- bearer token in BENCH_TOKEN. Prints the same JSON summary as wrk_pool.lua.
local common = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./") ..
                      "wrk_common.lua")
local token = os.getenv("BENCH_TOKEN")
local counter = 0

function setup(thread)
  thread:set("tid", counter)
  counter = counter + 1
end

local mode
local path
local ids = {}
local hi, lo = 0, 0
local headers

local REGIONS = common.REGIONS
local B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

local luhn = common.luhn

local function base64(s)
  local out = {}
  for i = 1, #s, 3 do
    local a, b, c = s:byte(i, i + 2)
    local n = a * 65536 + (b or 0) * 256 + (c or 0)
    local chars = 4
    if b == nil then chars = 2 elseif c == nil then chars = 3 end
    for k = 1, 4 do
      if k <= chars then
        local v = math.floor(n / 64 ^ (4 - k)) % 64
        out[#out + 1] = B64:sub(v + 1, v + 1)
      else
        out[#out + 1] = "="
      end
    end
  end
  return table.concat(out)
end

function init(args)
  mode = args[1]
  headers = {["Authorization"] = "Bearer " .. token, ["Content-Type"] = "application/json"}
  if mode == "create" then
    path = "/v1/tokenization/keys/" .. args[2] .. "/tokenize"
    -- 15 digits (5, the thread, then 13 from a counter that starts at the given number), then
    -- the Luhn check digit.
    hi = tonumber(args[3]) + tid * 1000
    lo = 0
  elseif mode == "get" then
    path = "/v1/tokenization/detokenize"
    local f = assert(io.open(args[2], "r"))
    for line in f:lines() do
      if line ~= "" then ids[#ids + 1] = line end
    end
    f:close()
    math.randomseed(tonumber(args[3]) + tid)
  else
    error("mode must be create or get")
  end
end

function request()
  if mode == "get" then
    return wrk.format("POST", path, headers,
                      string.format('{"token":"%s"}', ids[math.random(#ids)]))
  end
  lo = lo + 1
  if lo >= 10000000 then
    lo = 0
    hi = hi + 1
  end
  local n = hi * 10000000 + lo
  local number = luhn(string.format("5%d%06d%07d", tid % 10, hi % 1000000, lo))
  local body = string.format(
    '{"plaintext":"%s","metadata":{"customer_id":"cus_%07d","region":"%s"}}',
    base64(number), math.floor(n / 50) % 10000000, REGIONS[1 + n % 8])
  return wrk.format("POST", path, headers, body)
end

done = common.done
