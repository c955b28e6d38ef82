"""Closed word classes the difference analysis (:mod:`agent_cache.differences`) reads.

Only *closed* classes live here: function words, number words, units, temporal words,
question words, audience/role nouns, negation markers. The open classes (which content
words mean different things) are never listed: the analysis refuses any unexplained
substitution of a content word in an otherwise identical question, so a pair nobody
listed is refused too. Two lists are open-class on purpose and only *name* a refusal or
*explain* a difference away:

- ``OPPOSITE_PAIRS``: a refusal reads "opposites" instead of "substitution", and an
  opposite is refused even when the rest of the question was reworded;
- ``SYNONYM_GROUPS``: words that may replace each other (a miss is the cost of a gap).
"""

from __future__ import annotations

__all__ = [
    "AUDIENCE",
    "AWAY",
    "CURRENCY",
    "DIRECTIONAL",
    "DIRECTION_OPPOSITES",
    "FILLER",
    "FUNCTION_WORDS",
    "MONTHS",
    "NEGATIONS",
    "NUMBER_WORDS",
    "OPENERS",
    "OPPOSITE_PAIRS",
    "ORDINALS",
    "QUESTION_WORDS",
    "RELATIVE_TIME",
    "SYMMETRIC",
    "SYNONYM_GROUPS",
    "TEMPORAL_WORDS",
    "TIME_UNITS",
    "TOWARD",
    "UNITS",
    "WEEKDAYS",
]

# Articles, pronouns, auxiliaries, conjunctions and the prepositions that do not change
# what is asked ("books on X" / "books about X"). Directional prepositions are not here.
FUNCTION_WORDS = frozenset(
    """
a an the this that these those there here it its it's they them their theirs i me my mine
myself we us our ours you your yours yourself he him his she her hers one one's someone
something anyone anything everyone everything is am are was were be been being do does did
doing done have has had having will would shall should can could may might must ought
and or but so if then else than as of on in at about for by via per within
what which how whatever however whichever also just only really actually exactly very
quite too such own
please kindly tell explain know let lets let's show give me need want wanna gonna like
way ways thing things kind lot lots bit little
get getting got gets go going make makes making made
question questions answer answers help thanks thank hi hello hey
possible possibly best good better easy easiest simple simplest quick quickly
proper properly correct correctly right actual basically generally usually typically
""".split()
)

# Filler that paraphrases add or drop freely ("what is the best way to", "can you tell me").
FILLER = frozenset(
    """
way ways best good easy easiest simple simplest possible proper properly correct correctly
really actually exactly basically generally please kindly tell explain know help need want
able step steps procedure process method methods guide tip tips idea ideas option options
ok okay alright um uh erm hmm well anyway honestly sorry quick wondering
""".split()
)

# Prepositions and particles that carry a direction or a relation: never ignored.
DIRECTIONAL = frozenset(
    """
to from into onto out off up down over under above below before after without with against
toward towards away inside outside inbound outbound upward downward forward backward
""".split()
)

# Directions that oppose each other: a left-over "to" against a left-over "from" turns
# the question around ("flights to Paris" / "flights from Paris"); "to" against "into" or
# "with" is a rewording ("connect X to Y" / "connect X with Y"), judged by similarity.
TOWARD = frozenset(
    ("to", "into", "onto", "toward", "towards", "inside", "inbound", "upward", "forward")
)
AWAY = frozenset(("from", "out", "off", "away", "outside", "outbound", "downward", "backward"))
DIRECTION_OPPOSITES = frozenset(
    {(a, b) for a in TOWARD for b in AWAY}
    | {
        ("up", "down"),
        ("over", "under"),
        ("above", "below"),
        ("before", "after"),
        ("with", "without"),
        ("with", "against"),
    }
)

# Words a question may open with before its first real word ("So, is it safe?", "OK how
# do I ..."): skipped when reading how a question opens.
OPENERS = frozenset({"so", "ok", "okay", "hi", "hey", "hello", "well", "please", "and", "but"})

# Connectors around which arguments may be swapped without changing the question.
SYMMETRIC = frozenset({"and", "or", "vs", "v", "versus", "&", ",", "/", "between", "or,"})

NEGATIONS = frozenset(
    """
not no never none nobody nothing nowhere neither nor without cannot cant dont doesnt didnt
isnt arent wasnt werent wont wouldnt shouldnt couldnt mustnt havent hasnt hadnt unable
non lack lacks lacking lacked missing absent
""".split()
)

# why/when/where/who ask for different things than each other and than how/what.
QUESTION_WORDS = frozenset({"why", "when", "where", "who", "whom", "whose"})

NUMBER_WORDS: dict[str, float] = {
    "zero": 0,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "thirteen": 13,
    "fourteen": 14,
    "fifteen": 15,
    "sixteen": 16,
    "seventeen": 17,
    "eighteen": 18,
    "nineteen": 19,
    "twenty": 20,
    "thirty": 30,
    "forty": 40,
    "fifty": 50,
    "sixty": 60,
    "seventy": 70,
    "eighty": 80,
    "ninety": 90,
    "hundred": 100,
    "thousand": 1000,
    "million": 1e6,
    "billion": 1e9,
    "trillion": 1e12,
    "dozen": 12,
    "half": 0.5,
    "quarter": 0.25,
    "single": 1,
    "double": 2,
    "twice": 2,
    "triple": 3,
    "once": 1,
    "thrice": 3,
}
ORDINALS: dict[str, int] = {
    "first": 1,
    "second": 2,
    "third": 3,
    "fourth": 4,
    "fifth": 5,
    "sixth": 6,
    "seventh": 7,
    "eighth": 8,
    "ninth": 9,
    "tenth": 10,
    "1st": 1,
    "2nd": 2,
    "3rd": 3,
}

# Units written after a number (or glued to it: "5kg"). Values are canonical unit names.
UNITS: dict[str, str] = {}
for _canon, _forms in {
    "kg": "kg kgs kilo kilos kilogram kilograms",
    "g": "g gram grams gr",
    "mg": "mg milligram milligrams",
    "lb": "lb lbs pound pounds",
    "oz": "oz ounce ounces",
    "t": "ton tons tonne tonnes",
    "km": "km kms kilometer kilometers kilometre kilometres",
    "m": "m meter meters metre metres",
    "cm": "cm centimeter centimeters",
    "mm": "mm millimeter millimeters",
    "mi": "mi mile miles",
    "ft": "ft foot feet",
    "in": "inch inches",
    "yd": "yd yard yards",
    "l": "l liter liters litre litres",
    "ml": "ml milliliter milliliters",
    "gal": "gal gallon gallons",
    "cup": "cup cups",
    "tbsp": "tbsp tablespoon tablespoons",
    "tsp": "tsp teaspoon teaspoons",
    "s": "s sec secs second seconds",
    "ms": "ms millisecond milliseconds",
    "min": "min mins minute minutes",
    "h": "h hr hrs hour hours",
    "day": "day days",
    "week": "wk wks week weeks",
    "month": "mo mos mth mths month months",
    "year": "yr yrs year years",
    "b": "byte bytes",
    "kb": "kb kilobyte kilobytes",
    "mb": "mb megabyte megabytes",
    "gb": "gb gigabyte gigabytes",
    "tb": "tb terabyte terabytes",
    "%": "% percent pct",
    "c": "°c celsius",
    "f": "°f fahrenheit",
    "mph": "mph",
    "kmh": "kmh kph",
    "w": "w watt watts",
    "kw": "kw kilowatt kilowatts",
    "v": "volt volts",
    "hz": "hz hertz",
    "ghz": "ghz",
    "mhz": "mhz",
    "px": "px pixel pixels",
    "usd": "usd dollar dollars $",
    "eur": "eur euro euros €",
    "gbp": "gbp £ sterling",
    "jpy": "jpy yen ¥",
    "inr": "inr rupee rupees ₹",
    "cad": "cad",
    "aud": "aud",
    "k": "k thousand",
    "cal": "cal calorie calories kcal",
    "mbps": "mbps",
    "gbps": "gbps",
    "people": "people persons person",
    "item": "item items",
    "user": "user users",
    "star": "star stars",
    "core": "core cores",
    "thread": "thread threads",
}.items():
    for _form in _forms.split():
        UNITS[_form] = _canon

CURRENCY = frozenset({"$", "€", "£", "¥", "₹"})

WEEKDAYS: dict[str, str] = {}
for _day in ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"):
    WEEKDAYS[_day] = _day
    WEEKDAYS[_day + "s"] = _day
    WEEKDAYS[_day[:3]] = _day
WEEKDAYS.update({"tues": "tuesday", "weds": "wednesday", "thur": "thursday", "thurs": "thursday"})
MONTHS: dict[str, str] = {}
for _month in (
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
):
    MONTHS[_month] = _month
    MONTHS[_month[:3]] = _month
MONTHS["sept"] = "september"
# "may", "mar", "jun", ... are words too: only read as months next to a number or a
# temporal preposition (see differences._temporal).
AMBIGUOUS_MONTHS = frozenset({"may", "mar", "jun", "jan", "aug", "oct", "dec", "sep"})

# Words that name a point or span in time, each with its canonical value.
TEMPORAL_WORDS: dict[str, str] = {
    "today": "day0",
    "tonight": "day0-night",
    "tomorrow": "day+1",
    "tomorrow's": "day+1",
    "yesterday": "day-1",
    "yesterday's": "day-1",
    "today's": "day0",
    "tonight's": "day0-night",
    "morning": "morning",
    "mornings": "morning",
    "afternoon": "afternoon",
    "afternoons": "afternoon",
    "evening": "evening",
    "evenings": "evening",
    "night": "night",
    "nights": "night",
    "overnight": "night",
    "noon": "noon",
    "midday": "noon",
    "midnight": "midnight",
    "dawn": "dawn",
    "sunrise": "dawn",
    "dusk": "dusk",
    "sunset": "dusk",
    "weekend": "weekend",
    "weekends": "weekend",
    "weekday": "weekday",
    "weekdays": "weekday",
    "spring": "spring",
    "summer": "summer",
    "autumn": "autumn",
    "winter": "winter",
    "q1": "q1",
    "q2": "q2",
    "q3": "q3",
    "q4": "q4",
    "h1": "h1",
    "h2": "h2",
    "daily": "daily",
    "weekly": "weekly",
    "monthly": "monthly",
    "quarterly": "quarterly",
    "yearly": "yearly",
    "annually": "yearly",
    "annual": "yearly",
    "hourly": "hourly",
    "biweekly": "biweekly",
    "am": "am",
    "a.m.": "am",
    "pm": "pm",
    "p.m.": "pm",
    "ago": "past",
    "past": "past",
    "later": "future",
    "upcoming": "future",
    "previous": "previous",
    "next": "next",
    "last": "last",
    "earlier": "past",
    "early": "early",
    "late": "late",
    "christmas": "christmas",
    "easter": "easter",
    "thanksgiving": "thanksgiving",
    "halloween": "halloween",
    "ramadan": "ramadan",
    "eve": "eve",
    "holiday": "holiday",
    "holidays": "holiday",
    "season": "season",
    "now": "present",
    "currently": "present",
    "current": "present",
    "nowadays": "present",
    "present": "present",
    "recently": "recent",
    "recent": "recent",
    "latest": "present",
}
# "now" / "today" / "currently" and saying nothing mean the same moment.
PRESENT = frozenset({"present", "day0"})
RELATIVE_TIME = frozenset({"this", "next", "last", "previous", "coming", "past", "following"})
TIME_UNITS = frozenset(
    {
        "day",
        "week",
        "month",
        "year",
        "quarter",
        "weekend",
        "season",
        "semester",
        "term",
        "decade",
        "century",
        "hour",
        "minute",
        "night",
        "morning",
        "evening",
        "afternoon",
        "spring",
        "summer",
        "autumn",
        "fall",
        "winter",
        "monday",
        "tuesday",
        "wednesday",
        "thursday",
        "friday",
        "saturday",
        "sunday",
        "time",
        "election",
        "release",
        "version",
    }
)

# Who is asking, or for whom: a different audience usually needs a different answer.
AUDIENCE = frozenset(
    """
admin admins administrator administrators root superuser moderator owner owners member
members guest guests visitor visitors user users customer customers client clients
employee employees staff manager managers employer employers contractor contractors
intern interns freelancer freelancers supervisor boss executive executives
student students teacher teachers professor professors parent parents child children kid
kids baby babies toddler toddlers teen teens teenager teenagers adult adults senior
seniors elderly retiree retirees beginner beginners novice novices intermediate expert
experts advanced professional professionals amateur amateurs developer developers
patient patients doctor doctors nurse nurses pregnant vegan vegetarian diabetic
man men woman women male female boy boys girl girls husband wife
business economy premium first-class coach enterprise personal individual family team
free paid pro basic standard plus trial resident residents nonresident citizen citizens
foreigner foreigners tourist tourists international domestic local landlord tenant
tenants buyer buyers seller sellers vendor vendors partner partners volunteer volunteers
dog dogs cat cats puppy puppies kitten kittens
""".split()
)

# Opposites (base forms: lemmas are compared). Morphological opposites (un-, in-, dis-,
# de-, non-, anti- prefixes, a swapped prefix over one stem, -ful/-less, -er/-ee) are
# found by rule in differences._morphological_opposites, not listed.
OPPOSITE_PAIRS: tuple[tuple[str, str], ...] = tuple(
    tuple(pair.split("/"))  # type: ignore[misc]
    for pair in """
ascend/descend ascending/descending asc/desc increase/decrease increment/decrement
raise/lower rise/fall grow/shrink expand/shrink expand/collapse expand/contract
enlarge/reduce maximize/minimize max/min maximum/minimum most/least more/less more/fewer
high/low higher/lower up/down upper/lower top/bottom above/below over/under
upstairs/downstairs uphill/downhill upstream/downstream upward/downward upload/download
open/close open/shut start/stop start/end start/finish begin/end begin/finish first/last
beginning/end early/late earliest/latest before/after prior/after past/future old/new
older/newer old/young oldest/newest ancient/modern previous/next last/next
buy/sell purchase/sell buyer/seller lend/borrow lender/borrower give/take give/receive
send/receive sender/recipient push/pull import/export importer/exporter
income/expense income/expenditure revenue/cost profit/loss gain/loss win/lose
winner/loser victory/defeat credit/debit deposit/withdraw deposit/withdrawal
asset/liability bull/bear bullish/bearish long/short rich/poor wealthy/poor
cheap/expensive inexpensive/expensive cheapest/priciest affordable/expensive
discount/surcharge save/spend saving/spending
cancel/create cancel/place cancel/book cancel/schedule cancel/renew
add/remove add/delete add/subtract plus/minus insert/delete attach/detach include/exclude
inclusive/exclusive join/leave enter/exit entry/exit arrive/depart arrival/departure
inbound/outbound incoming/outgoing inflow/outflow inside/outside internal/external
interior/exterior inner/outer in/out on/off enable/disable enabled/disabled
activate/deactivate allow/deny allow/block allow/forbid allowed/forbidden accept/reject
accept/decline approve/reject approve/deny grant/revoke permit/prohibit legal/illegal
lock/unlock mount/unmount install/uninstall subscribe/unsubscribe follow/unfollow
like/dislike love/hate favorite/least-favorite connect/disconnect online/offline
sync/async synchronous/asynchronous encrypt/decrypt encode/decode compress/decompress
zip/unzip serialize/deserialize pack/unpack wrap/unwrap load/unload
mute/unmute block/unblock pin/unpin hide/show hide/unhide visible/hidden
public/private show/hide reveal/conceal freeze/unfreeze freeze/thaw freeze/melt
login/logout log-in/log-out signin/signout sign-in/sign-out signup/cancel
upgrade/downgrade promote/demote hire/fire hire/dismiss employ/dismiss
create/delete create/destroy create/drop create/remove build/destroy build/demolish
make/break install/remove mount/dismount plug/unplug charge/discharge
fill/empty full/empty full/partial wet/dry hot/cold warm/cool heat/cool heating/cooling
hottest/coldest warmest/coolest summer/winter spring/autumn day/night sunrise/sunset
dawn/dusk morning/evening am/pm light/dark light/heavy bright/dim loud/quiet
loud/soft hard/soft hard/easy difficult/easy easiest/hardest complex/simple
fast/slow faster/slower quick/slow quickly/slowly speed/slow accelerate/decelerate
big/small large/small huge/tiny long/short tall/short wide/narrow thick/thin heavy/light
deep/shallow far/near distant/close strong/weak strength/weakness
pro/con pros/cons advantage/disadvantage benefit/drawback benefit/risk strength/weakness
positive/negative plus/minus good/bad better/worse best/worst right/wrong correct/incorrect
true/false yes/no always/never everything/nothing everyone/nobody all/none any/none
success/failure succeed/fail pass/fail valid/invalid safe/unsafe safe/dangerous
healthy/unhealthy clean/dirty happy/sad optimistic/pessimistic
male/female man/woman men/women boy/girl husband/wife father/mother son/daughter
brother/sister king/queen uncle/aunt nephew/niece grandfather/grandmother
adult/child parent/child teacher/student employer/employee landlord/tenant
buyer/vendor host/guest master/slave leader/follower primary/secondary primary/replica
master/replica client/server frontend/backend front-end/back-end front/back
north/south east/west northern/southern eastern/western left/right horizontal/vertical
clockwise/counterclockwise clockwise/anticlockwise forward/backward forwards/backwards
forward/reverse ahead/behind inward/outward import/export input/output read/write
reader/writer request/response question/answer ask/answer upvote/downvote like/dislike
uppercase/lowercase upper-case/lower-case capital/lowercase majority/minority
maximal/minimal major/minor senior/junior junior/senior expert/beginner advanced/beginner
offensive/defensive attack/defend attacker/defender offense/defense
war/peace love/war friend/enemy ally/enemy agree/disagree include/omit
remember/forget find/lose catch/throw throw/catch push/pop enqueue/dequeue
encourage/discourage appear/disappear approve/disapprove obey/disobey
like/unlike able/unable capable/incapable possible/impossible likely/unlikely
necessary/unnecessary required/optional mandatory/optional compulsory/voluntary
inclusive/exclusive permanent/temporary temporary/permanent static/dynamic
stable/unstable mutable/immutable global/local remote/local local/remote
manual/automatic automatic/manual analog/digital physical/virtual real/fake
organic/inorganic natural/artificial natural/synthetic raw/cooked fresh/frozen
fresh/stale sweet/sour sweet/bitter sweet/savory salty/sweet spicy/mild
acidic/alkaline acid/base acid/alkaline cathode/anode anode/cathode proton/electron
import/export immigrant/emigrant immigration/emigration inhale/exhale
ingress/egress inject/extract insert/extract
rural/urban urban/rural city/countryside domestic/international domestic/foreign
national/international indoor/outdoor indoors/outdoors inland/coastal
expensive/affordable paid/free premium/free wholesale/retail
absorb/emit absorb/release attract/repel magnetic/nonmagnetic
conductor/insulator solid/liquid liquid/gas melt/freeze boil/freeze evaporate/condense
sunny/rainy wet/dry humid/dry summer/winter
ascending/descending alpha/omega alphabetical/reverse
earliest/latest oldest/youngest newest/oldest latest/earliest
fastest/slowest cheapest/dearest largest/smallest biggest/smallest highest/lowest
longest/shortest most/fewest strongest/weakest best/worst
maximum/minimum greater/less greater/smaller greater/fewer equal/unequal peak/trough
ceiling/floor overestimate/underestimate
overweight/underweight overpaid/underpaid overrated/underrated overflow/underflow
overcook/undercook overdose/underdose surplus/deficit excess/shortage
""".split()
    if "/" in pair and all(part.isascii() for part in pair.split("/"))
)

# Words (or phrases, joined by a space) that may replace each other without changing
# the question. Only helps hits: a missing synonym costs a miss, never a wrong answer.
SYNONYM_GROUPS: tuple[frozenset[str], ...] = tuple(
    frozenset(group.split("|"))
    for group in """
enable|turn on|switch on|activate|set up|setup
disable|turn off|switch off|deactivate
remove|delete|erase|get rid of|uninstall app
buy|purchase
begin|start|commence|kick off
finish|complete|end|wrap up
fix|repair|resolve|solve|troubleshoot
problem|issue|error|trouble|bug
big|large|huge|massive
small|little|tiny
fast|quick|rapid|speedy|quickly
cheap|inexpensive|affordable|budget|low-cost|low cost
expensive|costly|pricey|pricy
cost|price|charge|fee|fees
car|automobile|vehicle
phone|smartphone|cellphone|cell phone|mobile|mobile phone
movie|film
photo|picture|image|pic
doctor|physician|gp
kid|child|children|kids
home|house
change|modify|update|alter|edit|amend
show|display|list|view
find|locate|look up|search for
choose|pick|select
use|utilize|utilise|employ
help|assist|support
make|create|build|generate
reboot|restart
shut down|power off|turn off
log in|login|sign in|signin|log into|sign into
log out|logout|sign out|signout|log off
sign up|signup|register|create an account|open an account
password|passcode|pass code
email|e-mail|mail
app|application
website|site|web site|webpage|web page
pc|computer|laptop computer
tv|television
ok|okay
usa|us|united states|america
uk|united kingdom|britain
learn|study
job|position|role
salary|pay|wage|wages|compensation
refund|money back
shipping|delivery
ship|deliver|send
parcel|package
address|location
begin|initiate
explain|describe
meaning|definition
mean|stand for
happen|occur
need|require|must
can|may|could|able to
allowed|permitted|allowed to|permitted to
because of|due to|owing to
quit|stop
near|close to|nearby
simple|easy|straightforward
difficult|hard|tough
correct|right|proper
wrong|incorrect
begin|onset
illness|disease|sickness
medicine|medication|drug|meds
lose weight|slim down|shed pounds
how long|how much time|how many seconds|how many secs
how long|how much time|how many minutes|how many mins
how long|how much time|how many hours|how many hrs
how long|how much time|how many days
how long|how much time|how many weeks|how many wks
how long|how much time|how many months|how many mos
how long|how much time|how many years|how many yrs
how far|distance|how far away
""".strip().splitlines()
)
