-- What bench/wrk_each.lua, wrk_peer.lua and wrk_pool.lua share, loaded by each with
-- `dofile` from the directory the script is in: the card numbers' Luhn digit, the metadata's
-- regions, and the JSON summary line the harnesses read (bench/loadgen.py parse_wrk).
local M = {}

M.REGIONS = {"eu-west", "eu-north", "us-east", "us-west", "ap-south", "ap-east", "sa-east", "af"}

-- `body` (digits) with its Luhn check digit appended.
function M.luhn(body)
  local total, len = 0, #body
  for pos = 0, len - 1 do
    local d = tonumber(body:sub(len - pos, len - pos))
    if pos % 2 == 0 then
      d = d * 2
      if d > 9 then d = d - 9 end
    end
    total = total + d
  end
  return body .. tostring((10 - total % 10) % 10)
end

-- wrk's `done`: one line, `BENCH_JSON {...}`, with the counts and latency percentiles (µs).
function M.done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'BENCH_JSON {"requests":%d,"duration_us":%d,"connect":%d,"read":%d,"write":%d,' ..
    '"status":%d,"timeout":%d,"p50":%.1f,"p99":%.1f,"p999":%.1f,"max":%.1f}\n',
    summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(99), latency:percentile(99.9), latency.max))
end

return M
