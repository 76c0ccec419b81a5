"""The decision model's synthetic task: customer support tickets whose answers are known because they are
generated from the answers. A ticket draws an issue, a wanted resolution, an urgency, a mood, whether it gives an
order number and whether the customer wrote before; each is written by a sentence frame filled with a cue
phrase. Cue phrases and vocabularies (products, names) are shared by all tickets; the FRAMES are split by a
seeded shuffle into training frames and held-out frames, and held-out tickets use held-out frames only, so
held-out accuracy measures tickets built from templates the training never saw. Filler sentences (no answer in
them, split the same way) sit at random places. Questions are choice (want, team, product: only where the ticket
names one, issue), score (urgency, mood: ordered levels) and noul (one statement, option "true")."""
import random

PRODUCTS = ["laptop", "phone", "headphones", "coffee maker", "desk chair", "monitor", "router", "blender",
            "backpack", "printer", "smart watch", "vacuum cleaner", "tablet", "camera", "keyboard", "microwave",
            "sofa", "bicycle", "speaker", "desk lamp", "air fryer", "gaming console", "mattress", "toaster",
            "electric kettle", "winter jacket", "running shoes", "hair dryer", "drill", "baby stroller"]
NAMES = ["Maria", "James", "Aisha", "Chen", "Olga", "Diego", "Priya", "Tom", "Fatima", "Lukas", "Yuki", "Sam",
         "Grace", "Omar", "Elena", "Noah", "Zoe", "Ivan", "Lena", "Raj", "Sofia", "Ben", "Mei", "Carlos"]

ISSUES = {  # label -> (team, cue phrases completing "the <product> ...")
    "late delivery": ("shipping", ["still hasn't arrived", "is two weeks late", "never showed up",
                                    "has been stuck in transit for ten days", "was due on Monday and is not here",
                                    "is lost somewhere in the mail"]),
    "damaged item": ("returns", ["arrived broken", "showed up with a cracked screen", "came completely smashed",
                                 "arrived dented and scratched", "was damaged inside the box", "arrived in pieces"]),
    "wrong item": ("returns", ["turned out to be the wrong model", "came in the wrong color",
                               "is not what I ordered", "arrived in the wrong size", "was meant for someone else",
                               "is a different brand than the one I paid for"]),
    "defective product": ("technical support", ["stopped working after two days", "won't turn on anymore",
                                                "keeps shutting off by itself", "makes a loud grinding noise",
                                                "drains its battery within an hour", "overheats after a few minutes"]),
    "billing error": ("billing", ["was charged to my card twice", "cost more than the price I was shown",
                                  "was billed again after I returned it", "shows up as two separate charges",
                                  "was charged in the wrong currency", "came with a fee nobody mentioned"]),
    "account access": ("accounts", ["I can't log into my account", "my password reset link doesn't work",
                                    "my account got locked", "the app says my email is not registered",
                                    "I never receive the login code", "my profile was taken over by someone"]),
}
TEAMS = ["shipping", "returns", "technical support", "billing", "accounts"]
WANTS = {
    "refund": ["a refund", "my money back", "a full refund", "the money returned to my card", "a reimbursement"],
    "replacement": ["a replacement", "a new one", "a replacement unit", "an exchange for a new one",
                    "a fresh unit shipped out"],
    "repair": ["a repair", "a fix for it", "a technician visit", "a warranty repair", "someone to repair it"],
    "store credit": ["store credit", "a voucher", "credit on my account", "a gift card for the amount",
                     "credit toward a future order"],
    "cancellation": ["a cancellation", "the order cancelled", "my subscription cancelled", "everything cancelled",
                     "the account closed"],
    "information": ["an explanation", "an update", "some information about what happened", "help getting in",
                    "clear answers"],
}
WANTS_BY_ISSUE = {"late delivery": ["refund", "replacement", "store credit", "cancellation", "information"],
                  "damaged item": ["refund", "replacement", "repair", "store credit"],
                  "wrong item": ["refund", "replacement", "store credit"],
                  "defective product": ["repair", "replacement", "refund", "store credit"],
                  "billing error": ["refund", "store credit", "information", "cancellation"],
                  "account access": ["information", "cancellation"]}
URGENCY = ["low", "medium", "high"]
URGENCY_CUES = {"high": ["urgently", "today", "immediately", "as soon as possible", "right away",
                         "before tomorrow morning"],
                "medium": ["this week", "in the next few days", "soon", "within a week", "before the weekend"],
                "low": ["whenever you can", "at your convenience", "when you have a moment", "sometime this month",
                        "with no rush"]}
MOODS = ["calm", "annoyed", "furious"]
MOOD_CUES = {"furious": ["furious", "absolutely livid", "outraged", "fed up and angry", "beyond angry"],
             "annoyed": ["a little annoyed", "somewhat frustrated", "a bit disappointed", "mildly irritated",
                         "not thrilled"],
             "calm": ["not upset at all", "perfectly calm about it", "fine with waiting", "relaxed about this",
                      "patient"]}
REPEAT_CUES = ["written to you before", "called twice already", "emailed last week", "contacted you three times",
               "chatted with an agent yesterday", "written to you twice this month", "complained about this before",
               "reported this a week ago", "been in touch about this already"]

# Sentence frames. Each list is split into training and held-out frames.
FRAMES = {
    "channel": ["Customer email:", "Chat message:", "Ticket:", "Support form:", "Message from the app:",
                "Web form submission:", "Email to support:", "New ticket:", "Support request:", "Contact form:",
                "Forwarded message:", "Helpdesk ticket:", "Message via website:"],
    "open": ["Hi,", "Hello team,", "Dear support,", "Hey there,", "Good morning,", "Hello,",
             "To whom it may concern,", "Hi support team,", "Hi there,", "Dear team,", "Greetings,",
             "Hello support,", "Hi folks,"],
    "product_issue": ["My {product} {cue}.", "I ordered a {product} last week and it {cue}.",
                      "The {product} I bought {cue}.", "So the {product} from your store {cue}.",
                      "Unfortunately my new {product} {cue}.", "I'm writing because the {product} {cue}.",
                      "The {product} that I received {cue}.", "Quick note: the {product} {cue}.",
                      "It seems the {product} I paid for {cue}.", "Last month I got a {product}, and it {cue}.",
                      "About the {product}: it {cue}.", "The {product} you sent me {cue}.",
                      "Regarding my {product} - it {cue}.", "This concerns a {product}, which {cue}.",
                      "Your {product} {cue}, and I am not happy.", "My recently purchased {product} {cue}."],
    "account_issue": ["{cap_cue}.", "I'm writing because {cue}.", "Since yesterday {cue}.", "Problem: {cue}.",
                      "For some reason {cue}.", "I noticed that {cue}.", "Ever since the update {cue}.",
                      "Help, {cue}.", "Quick problem: {cue}.", "Today {cue}.", "Apparently {cue}.",
                      "Just so you know, {cue}."],
    "want": ["I would like {want}.", "All I want is {want}.", "Can I get {want}?", "I'm asking for {want}.",
             "What I need is {want}.", "I expect {want}.", "Could you give me {want}?", "I'd appreciate {want}.",
             "Please just give me {want}.", "My request is simple: {want}.", "The fix I want is {want}.",
             "I am requesting {want}.", "I want {want}.", "Please arrange {want}.", "Ideally I would get {want}.",
             "I am hoping for {want}.", "The outcome I want is {want}.", "Send me {want}, please.",
             "I was told I could get {want}.", "The best solution for me is {want}.", "I think {want} is fair.",
             "Could we go with {want}?", "I would be happy with {want}.", "So I am asking you for {want}."],
    "want_not": ["I don't want {other}, I want {want}.", "Not {other} - {want}, please.",
                 "Forget {other}; I need {want}.", "I'm not interested in {other}, only {want}.",
                 "Rather than {other}, I'd like {want}.", "Please, no {other}. Just {want}.",
                 "Instead of {other} I want {want}.", "{cap_other} won't do, I need {want}.",
                 "Skip {other}, I want {want}.", "Not interested in {other}; {want} please.",
                 "I am asking for {want}, not {other}.", "I want {want}, not {other}.",
                 "Give me {want} rather than {other}.", "What I need is {want} and not {other}.",
                 "{cap_other} is no good to me; I want {want}.", "Please don't offer {other}, I want {want}.",
                 "I would prefer {want} over {other}.", "Don't bother with {other}. {want} is what I need.",
                 "No {other} this time, {want} please.", "You offered {other}, but I want {want}."],
    "urgency": ["I need this sorted {cue}.", "Please handle it {cue}.", "Could someone reply {cue}?",
                "I'd like an answer {cue}.", "It has to be resolved {cue}.", "Please get back to me {cue}.",
                "Let me know {cue}.", "A response {cue} would be great.", "I need to hear back {cue}.",
                "Deal with this {cue}, please.", "Reply {cue} please.", "I expect a reply {cue}.",
                "This needs attention {cue}.", "Sort it out {cue}.", "Answer me {cue}.",
                "Please look into it {cue}.", "Someone should check this {cue}.", "I hope to hear from you {cue}.",
                "Timing: {cue}.", "If possible, reply {cue}.", "We can talk about it {cue}.",
                "A fix {cue} would help.", "Get in touch {cue}.", "I'd like this looked at {cue}."],
    "mood": ["I am {cue}.", "Honestly I'm {cue}.", "To be clear, I'm {cue}.", "Right now I feel {cue}.",
             "As you can imagine, I'm {cue}.", "I have to say I'm {cue}.", "I'm {cue} about the whole thing.",
             "Frankly, I am {cue}.", "I feel {cue}.", "Right now I am {cue}.", "Honestly, I feel {cue}.",
             "I must say I am {cue}.", "Overall I am {cue}.", "Emotionally, I am {cue}."],
    "repeat": ["I have {cue}.", "Note that I've {cue}.", "For the record, I've {cue} about this.",
               "This isn't new: I've {cue}.", "Just so you know, I have {cue}.", "Keep in mind I've {cue}.",
               "I've already {cue}.", "Previously I have {cue}.", "This is a follow-up: I have {cue}.",
               "As mentioned before, I have {cue}.", "This is not the first time: I have {cue}."],
    "first": ["This is my first message about it.", "I haven't contacted you about this before.",
              "First time reaching out.", "This is the first time I write to you.",
              "I'm contacting you for the first time.", "I am writing about this for the first time.",
              "No earlier contact about this.", "This is a new issue for me.",
              "Never contacted you before about it."],
    "order": ["My order number is {order}.", "Order #{order}.", "The order is {order}.", "Reference: {order}.",
              "It was order {order}.", "Order ID {order} for reference.", "(order {order})",
              "You can find it under order {order}.", "Order number: {order}.", "The order was {order}.",
              "Order reference {order}.", "My order is #{order}.",
              "Here is the order number: {order}.", "The number on my receipt is {order}.",
              "I placed order {order}.", "For your records, order {order}."],
    "no_order": ["I can't find my order number.", "I lost the order confirmation.",
                 "I don't have the order number handy.", "Not sure what the order number was.",
                 "The confirmation email never came, so no order number.", "No order number, sorry.",
                 "I do not remember the order number.", "I threw away the receipt with the order number.",
                 "The order number is missing from my email.",
                 "I have no order number to give you.", "The receipt got wet, so I can't read the order number.",
                 "I never got an order number.", "Sorry, I can't give you the order number.",
                 "My order number is gone with my old phone.", "I deleted the email that had the order number."],
    "close": ["Thanks, {name}", "Regards, {name}", "- {name}", "Best, {name}", "Cheers, {name}",
              "Sincerely, {name}", "Thank you, {name}", "{name}", "Kind regards, {name}", "All the best, {name}",
              "Yours, {name}", "Many thanks, {name}"],
    # Sentences that carry no answer, so a model cannot lean on where a frame usually sits.
    "filler": ["I hope you are doing well.", "Thanks in advance for your help.", "See the details below.",
               "I have attached a photo.", "I've been a customer for years.", "I tried the FAQ first.",
               "My neighbour recommended your shop.", "I'm writing from my phone, sorry for typos.",
               "The weather here has been awful.", "I read your terms before writing.",
               "Let me explain what happened.", "Everything else was fine so far."],
}

# Training-only variations (make_ticket(..., augment=True)). The held-out test writes tickets with sentence frames
# the training never saw, so what a model may learn from is the cue, not the frame around it; these take away the
# frames' words as evidence:
# - orders: an order frame filled with words instead of a number is a ticket without an order number ("My order
#   number is missing."), a no-order sentence followed by a number one with it ("I can't find my order number,
#   maybe 48213."), and some tickets without a number say nothing about it, so that only the number says one was
#   given (the model of 2026-12-03, trained without the last of these, answered "true" unless a no-order sentence
#   of the training frames was there: 0.56 on held-out frames);
# - a cue alone in a bare frame carries its answer with no frame words at all;
# - "not X, Y" wants come more often, so the negation is learned from many frames, not from a few;
# - opt-in (make_ticket's cross_frames, train_decision.py --cross-frames): a product's problem in an account
#   problem's frame. The shipped model of 2026-12-03 (trained without it) routed held-out product frames that read
#   like training account frames ("Quick note: the drill ...") to accounts; the one run with it at 0.3 (one
#   variant, 165 s) stalled at loss 0.63 (urgency and product at chance; in the shipped 326 s run both were
#   learned late, urgency at once near step 4,000), so it is off until a run of full length beside one without.
NO_ORDER_FILLS = ["missing", "unknown", "lost", "not in my email", "nowhere to be found", "not something I have",
                  "gone", "not on the receipt", "unclear to me", "somewhere in my inbox"]
NUMBER_AFTER = [", maybe {order}.", " - I think it is {order}.", ", but it could be {order}.",
                ", it might be {order}.", "; try {order}."]
BARE_FRAMES = ["{cue}.", "Also: {cue}.", "P.S. {cue}.", "Note - {cue}.", "Re: {cue}.", "And {cue}.",
               "One more thing: {cue}."]
AUGMENT_P = 0.3  # the chance of each variation where it applies (a ticket without a number: a worded fill, or
#                  with the same chance no order sentence at all)
WANT_NOT_P = 0.25      # the share of "not X, Y" wants in a ticket
WANT_NOT_P_AUGMENTED = 0.45

QUESTIONS = {  # key -> (qtype, phrasings)
    "want": ("choice", ["What does the customer want?", "What resolution is the customer asking for?",
                        "What is the customer requesting?"]),
    "team": ("choice", ["Which team should handle it?", "Where should this ticket be routed?",
                        "Which department owns this ticket?"]),
    "product": ("choice", ["What product is the ticket about?", "Which item is the customer writing about?"]),
    "issue": ("choice", ["What went wrong?", "What is the problem?", "What kind of issue is this?"]),
    "urgency": ("score", ["How urgent is this ticket?", "How quickly does this need a response?"]),
    "mood": ("score", ["How upset is the customer?", "How angry is the customer?"]),
    "angry": ("noul", ["The customer is angry.", "The customer is furious."]),
    "money": ("noul", ["The customer wants their money back.", "The customer asks for a refund."]),
    "has_order": ("noul", ["The customer gave an order number.", "The ticket includes an order number."]),
    "repeat": ("noul", ["The customer has contacted support before.", "This is not the customer's first contact."]),
    "delivery": ("noul", ["The problem is a late delivery.", "The package has not arrived."]),
    "billing": ("noul", ["The ticket is about a billing problem.", "The customer was charged incorrectly."]),
}
QTYPE_INDEX = {"choice": 0, "score": 1, "noul": 2}


def split_frames(seed, heldout_fraction=0.3):
    """{kind: (train frames, held-out frames)}, deterministic from the seed."""
    rng = random.Random(seed)
    out = {}
    for kind, frames in FRAMES.items():
        order = list(frames)
        rng.shuffle(order)
        n = max(1, int(round(len(order) * heldout_fraction)))
        out[kind] = (order[n:], order[:n])
    return out


def _cap(s):
    return s[0].upper() + s[1:]


def make_ticket(rng, frames, augment=False, cross_frames=0.0, want_not=None):
    """A ticket {"state": text, "facts": {...}} written with `frames` ({kind: list}); `augment` (training only)
    adds the variations above; with `augment`, `cross_frames` is the chance that a product's problem is written
    in an account problem's frame ("I'm writing because the drill arrived broken."), 0 draws nothing, and
    `want_not` (None: WANT_NOT_P_AUGMENTED) the share of "not X, Y" wants."""
    f = lambda k: rng.choice(frames[k])

    def cued(kind, cue):  # a frame of `kind` around `cue`, or under augmentation sometimes a bare one
        if augment and rng.random() < AUGMENT_P:
            return rng.choice(BARE_FRAMES).format(cue=cue)
        return f(kind).format(cue=cue)

    issue = rng.choice(list(ISSUES))
    team, issue_cues = ISSUES[issue]
    want = rng.choice(WANTS_BY_ISSUE[issue])
    facts = {"issue": issue, "team": team, "want": want, "product": rng.choice(PRODUCTS),
             "urgency": rng.choice(URGENCY), "mood": rng.choice(MOODS), "has_order": rng.random() < 0.6,
             "repeat": rng.random() < 0.45, "name": rng.choice(NAMES)}
    order = str(rng.randint(1000, 99999)) if rng.random() < 0.7 else f"{rng.choice('ABCDEFGH')}-{rng.randint(100, 9999)}"
    cue = rng.choice(issue_cues)
    if issue == "account access":
        body = [f("account_issue").format(cue=cue, cap_cue=_cap(cue))]
    elif augment and cross_frames > 0 and rng.random() < cross_frames:
        said = f"the {facts['product']} {cue}"
        body = [f("account_issue").format(cue=said, cap_cue=_cap(said))]
    else:
        body = [f("product_issue").format(product=facts["product"], cue=cue)]
    want_phrase = rng.choice(WANTS[want])
    not_p = (WANT_NOT_P_AUGMENTED if want_not is None else want_not) if augment else WANT_NOT_P
    facts["said_against"] = rng.random() < not_p
    if facts["said_against"]:  # the want said against another resolution: "I want a refund, not a replacement."
        other = rng.choice([w for w in WANTS if w != want])
        other_phrase = rng.choice(WANTS[other])
        body.append(f("want_not").format(want=want_phrase, other=other_phrase, cap_other=_cap(other_phrase)))
    else:
        body.append(f("want").format(want=want_phrase))
    extra = [cued("urgency", rng.choice(URGENCY_CUES[facts["urgency"]])),
             cued("mood", rng.choice(MOOD_CUES[facts["mood"]]))]
    if facts["mood"] == "furious" and rng.random() < 0.5:
        extra[-1] = extra[-1].rstrip(".") + "!"
    if facts["repeat"]:
        extra.append(cued("repeat", rng.choice(REPEAT_CUES)))
    elif rng.random() < 0.5:
        extra.append(f("first"))
    if facts["has_order"] and augment and rng.random() < AUGMENT_P:
        extra.append(f("no_order").rstrip(".") + rng.choice(NUMBER_AFTER).format(order=order))
    elif facts["has_order"]:
        extra.append(f("order").format(order=order))
    else:
        r = rng.random() if augment else 1.0
        if r < AUGMENT_P:
            extra.append(f("order").format(order=rng.choice(NO_ORDER_FILLS)))
        elif r >= 2 * AUGMENT_P:
            extra.append(f("no_order"))
        # else nothing: most customers who give no number say nothing about it
    extra += [f("filler") for _ in range(rng.choice((0, 0, 1, 1, 2)))]
    rng.shuffle(extra)
    parts = [f("channel")] + ([f("open")] if rng.random() < 0.8 else []) + body[:1]
    rest = body[1:] + extra
    rng.shuffle(rest)
    parts += rest + [f("close").format(name=facts["name"])]
    facts["names_product"] = issue != "account access"  # an account problem mentions no product
    return {"state": " ".join(parts), "facts": facts}


def truth(key, facts):
    """The answer to question `key`: an option label (choice/score) or a bool (noul)."""
    if key in ("want", "team", "product", "issue", "urgency", "mood"):
        return facts[key]
    return {"angry": facts["mood"] == "furious", "money": facts["want"] == "refund", "has_order": facts["has_order"],
            "repeat": facts["repeat"], "delivery": facts["issue"] == "late delivery",
            "billing": facts["issue"] == "billing error"}[key]


def options_for(rng, key, answer):
    """(options, index of the answer); choice options are a shuffled subset holding the answer."""
    if key == "urgency":
        return list(URGENCY), URGENCY.index(answer)
    if key == "mood":
        return list(MOODS), MOODS.index(answer)
    pool = {"want": list(WANTS), "team": TEAMS, "product": PRODUCTS, "issue": list(ISSUES)}[key]
    k = rng.randint(2, min(6, len(pool)))
    opts = [answer] + rng.sample([p for p in pool if p != answer], k - 1)
    rng.shuffle(opts)
    return opts, opts.index(answer)


def ask(rng, key, facts):
    """A question of `key` about a ticket with these facts: a dict with key, qtype, question (a phrasing), options
    (choice: a shuffled subset holding the answer; score: the levels; noul: ["true"]) and answer (the index of the
    right option; for noul 1 if the statement is true, else 0)."""
    qtype, phrasings = QUESTIONS[key]
    phrasing = rng.choice(phrasings)
    ans = truth(key, facts)
    if qtype == "noul":
        return {"key": key, "qtype": qtype, "question": phrasing, "options": ["true"], "answer": int(ans)}
    opts, idx = options_for(rng, key, ans)
    return {"key": key, "qtype": qtype, "question": phrasing, "options": opts, "answer": idx}


def questions_for(rng, ticket, per_type=2):
    """per_type questions of each type (an int, or a dict by type) about a ticket, as ask() makes them, each key
    once (the product only where the ticket names one)."""
    out = []
    for qtype in ("choice", "score", "noul"):
        n = per_type[qtype] if isinstance(per_type, dict) else per_type
        keys = [k for k, (t, _) in QUESTIONS.items()
                if t == qtype and (k != "product" or ticket["facts"]["names_product"])]
        out += [ask(rng, key, ticket["facts"]) for key in rng.sample(keys, min(n, len(keys)))]
    return out


def more_questions(rng, ticket, key, n):
    """n more questions of `key` about a ticket, each with its own options (training asks the product more often:
    matching an option to the product the text names is what a small model learns last)."""
    if key == "product" and not ticket["facts"]["names_product"]:
        return []
    return [ask(rng, key, ticket["facts"]) for _ in range(n)]


def all_texts(frames, rng, n):
    """Tickets and question/option strings for training the tokenizer (training frames only)."""
    texts = [make_ticket(rng, frames)["state"] for _ in range(n)]
    for qtype, phrasings in QUESTIONS.values():
        texts += [f"{qtype} question: {p}" for p in phrasings]
    texts += [" " + o for o in PRODUCTS + TEAMS + list(WANTS) + list(ISSUES) + URGENCY + MOODS + ["true"]]
    return texts
