-- wrk script for the benchmark's logged-in row: GET / as the logged-in users
-- whose PHPSESSID values are in DEMO_SESSIONS (space separated), each
-- connection taking the next user in turn.
local sessions = {}
for s in string.gmatch(os.getenv("DEMO_SESSIONS") or "", "%S+") do
  sessions[#sessions + 1] = s
end
if #sessions == 0 then
  error("DEMO_SESSIONS is empty: no PHPSESSID to send")
end

local n = 0
local offset = 0

function setup(thread)
  offset = offset + 1
  thread:set("offset", offset)
end

function request()
  n = n + 1
  local sid = sessions[((n + (offset or 0) * 7) % #sessions) + 1]
  return wrk.format("GET", "/", { ["Cookie"] = "PHPSESSID=" .. sid })
end
