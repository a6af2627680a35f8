-- wrk script for bench/http: every request its own Idempotency-Key
-- (thread number and a counter), the same small JSON body shape.
-- BENCH_HTTP_REPLAY=N: keys cycle over N per thread instead (replays of
-- stored answers once the first round is in).
local threads = {}
local n = 0

function setup(thread)
	n = n + 1
	thread:set("tid", n)
	table.insert(threads, thread)
end

function init(args)
	counter = 0
	replay = tonumber(os.getenv("BENCH_HTTP_REPLAY") or "0")
	run = os.getenv("BENCH_HTTP_RUN") or "r"
end

function request()
	counter = counter + 1
	local k = counter
	if replay > 0 then
		k = (counter % replay) + 1
	end
	local key = run .. "-" .. tid .. "-" .. k
	local body = '{"id":"' .. key .. '","cents":' .. (k % 1000) .. '}'
	return wrk.format("POST", nil, {
		["Idempotency-Key"] = key,
		["Content-Type"] = "application/json"}, body)
end
