-- wrk script for the demo's load surge: a mix of what a busy PHP site gets.
-- 60% anonymous home page, 15% the news page (DEMO_NEWS, default /news.php),
-- 15% static files (DEMO_STATICS, space separated) and 10% the home page of
-- logged-in users (values of the DEMO_SESSION_COOKIE cookie, default
-- PHPSESSID, in DEMO_SESSIONS, space separated; the mix falls back to static
-- files when there are none).
-- With DEMO_CROWD=1 (make demo), each request comes from one of a crowd of
-- 508 visitors (documentation addresses, 198.51.100.0/24 and
-- 203.0.113.0/24), named in X-Forwarded-For as a TLS terminator or proxy on
-- loopback names them: Varnish budgets each visitor as itself
-- (profiles.client_budget), and gearshift counts the surge as forwarded,
-- not as unidentified local requests (status front_door). A logged-in
-- user's requests too come from the crowd: a session at the surge's pace
-- from one address would be a script, over its budget. Without it every
-- request comes from loopback itself, as the benchmarks measured it.
-- Each connection pauses DEMO_SURGE_DELAY_MS (default 10) between requests,
-- as visitors do: once Varnish serves from cache the surge's rate is capped
-- (about connections x 100 req/s) and the machine's load falls while the
-- surge goes on, as it does on a real site.
local sessions = {}
for s in string.gmatch(os.getenv("DEMO_SESSIONS") or "", "%S+") do
  sessions[#sessions + 1] = s
end
local statics = {}
for s in string.gmatch(os.getenv("DEMO_STATICS") or "/style.css /logo.png", "%S+") do
  statics[#statics + 1] = s
end
local news = os.getenv("DEMO_NEWS") or "/news.php"
local cookie = os.getenv("DEMO_SESSION_COOKIE") or "PHPSESSID"
local pause = tonumber(os.getenv("DEMO_SURGE_DELAY_MS") or "10")

function setup(thread)
  thread:set("id", math.random(1, 1000000))
end

function init(args)
  math.randomseed(os.time() + (id or 0))
end

local crowd = os.getenv("DEMO_CROWD") == "1"
local nets = { "198.51.100.", "203.0.113." }

local function visitor()
  if not crowd then
    return {}
  end
  return { ["X-Forwarded-For"] = nets[math.random(#nets)] .. math.random(1, 254) }
end

function request()
  local r = math.random(100)
  local headers = visitor()
  if r <= 60 then
    return wrk.format("GET", "/", headers)
  elseif r <= 75 then
    return wrk.format("GET", news, headers)
  elseif r <= 90 or #sessions == 0 then
    return wrk.format("GET", statics[math.random(#statics)], headers)
  end
  headers["Cookie"] = cookie .. "=" .. sessions[math.random(#sessions)]
  return wrk.format("GET", "/", headers)
end

function delay()
  return pause
end
