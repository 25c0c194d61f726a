# ruff: noqa: E501  (the messages are data: one line each, as written)
"""Writes demo/conversation/vault/ and demo/conversation/questions.json (deterministic: seed 23).

A group chat of six friends in Bristol, January to May 2025: a trip to Lisbon whose dates move, a flat
move, a surprise 60th birthday, a half marathon, a job offer, an allotment, a car that fails its MOT, a
dog with an ear infection, a book club, a pub quiz, a gig. One note per message, under
``vault/<date>/<nn> <Speaker>.md`` (the key is that path without ``.md``). The conversation is written
out below, session by session; the seeded part only places the small talk between the messages and
the minutes between them. The questions at the end were written from the messages (their ``label``),
before any retrieval was run on the set, and are never edited after (``MANIFEST.sha256``).

    python demo/conversation/generate.py        # rewrites vault/ and questions.json
"""

from __future__ import annotations

import json
import random
import shutil
from datetime import date, datetime, timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
SEED = 23

PEOPLE = ["Maya", "Tomás", "Priya", "Jonas", "Elif", "Dev"]

# Small talk: placed by the seeded generator between the written messages, without replacement.
CHATTER = [
    "haha",
    "ok that's fair",
    "omg yes",
    "brb, kettle",
    "lol",
    "sounds good to me",
    "same",
    "wait what",
    "I'm in",
    "can't tonight sorry, next time",
    "👍",
    "who's bringing snacks",
    "ugh Mondays",
    "did anyone else get soaked on the way home? that rain was biblical",
    "just got home, catching up on the chat",
    "sorry, been in meetings all day",
    "hahaha I'm crying",
    "is it just me or is the 72 bus always late now",
    "that's so nice",
    "fair enough",
    "noted",
    "yes please",
    "I'll let you know later",
    "can someone remind me tomorrow",
    "I have literally no memory of saying that",
    "good shout",
    "fine by me",
    "this chat is chaos",
    "morning all",
    "night all x",
    "send pics!",
    "I'm so tired",
    "haha classic",
    "ok I'm off to cook, back later",
    "anyone watching the rugby?",
    "not me, I'm on the sofa with a blanket",
    "that's actually a great idea",
    "hmm not sure",
    "let me check and come back to you",
    "thanks for sorting that",
    "you're a star",
    "oh no",
    "what a week",
    "yesss",
    "no rush",
    "I owe you one",
    "agreed",
    "ha, true",
    "does anyone have a phone charger I can borrow on Sunday",
    "my phone is on 3% so if I go quiet that's why",
    "ok going to bed, don't make any decisions without me",
    "read back through and I agree with everything",
    "love this group",
    "I've muted the chat for an hour, I have a deadline",
    "back! what did I miss",
    "too much to scroll, someone summarise",
    "I'll add it to the shared calendar",
    "calendar invite sent",
    "happy Friday everyone",
    "the weather is finally nice",
    "it's freezing again",
    "my plants are dying, send help",
    "has anyone seen the new series everyone's talking about",
    "no spoilers please",
    "that was hilarious",
    "on my way",
    "running ten minutes late, sorry",
    "grabbing a coffee first, anyone want one",
    "we should do this more often",
    "agreed, last night was lovely",
    "thanks for hosting!",
    "who left a scarf at mine? grey, quite long",
    "mine! thank you, I'll grab it next time",
    "ok I'll stop spamming the chat now",
    "ha I was thinking exactly the same",
    "can't wait",
    "counting down the days",
    "right, back to work",
    "excellent",
    "perfect",
    "so sorry, totally forgot to reply",
    "I'm easy either way",
    "whatever works for everyone else",
    "let's vote",
    "I vote yes",
    "same vote",
    "ok majority wins",
    "I'll bring wine",
    "I'll bring crisps then",
    "I'm driving so I'll be on lemonade",
    "did anyone take photos?",
    "I got a couple, will send",
    "this is why I love you all",
    "thread got long, I'm lost",
    "brilliant",
    "honestly same",
    "what time is it there?",
    "sorry wrong chat 🙈",
    "hope everyone is having a good weekend",
    "starving, what's everyone having for dinner",
    "leftovers, as always",
    "pasta, as always",
    "my train is cancelled, of course",
    "the M32 was a car park this morning",
    "back on the chat after a digital detox weekend, it was bliss",
    "did anyone else's bin not get collected this week",
    "the council app says Tuesday, the lorry says otherwise",
    "I've started going to bed at ten, I'm officially old",
    "what's the wifi password at yours again? asking for my phone",
    "I'm going to the gym. Ok I'm thinking about going to the gym",
    "someone at work brought in cinnamon buns, today is a good day",
    "my landlord finally fixed the boiler, only took three weeks",
    "is anyone free for a coffee on Saturday morning",
    "I can do Saturday after 11",
    "cool, Small Street Espresso at 11:30?",
    "I've lost my keys again",
    "found them. In the fridge. Don't ask",
    "happy Monday, or whatever",
    "just seen a fox in the garden, it looked at me like I owed it money",
    "has anyone got a ladder I can borrow",
    "I do, it's in the shed, come whenever",
    "I think I've caught the cold that's going round",
    "lemon, honey, ginger and bed",
    "feel better x",
    "this week has lasted a month",
    "the sun is out, everyone go outside",
    "I'm at the harbourside, it's packed",
    "drinks at the Grain Barge later? anyone",
    "maybe, if I finish this report",
    "going to try that new ramen place on Park Street",
    "report back!",
    "the ramen was excellent, the queue was not",
]

# The conversation: (date, start time, [(speaker, text) or (speaker, text, label)]). A label names a
# message that a question below is about.
SESSIONS = [
    (
        "2025-01-04",
        "18:05",
        [
            ("Maya", "Happy new year lovely people! Resolution for this group: we actually do the trip this year"),
            ("Tomás", "Which trip, the one we've been talking about since 2022?"),
            (
                "Maya",
                "Yes. Lisbon. I'm thinking a long weekend in May, Friday 9th to Tuesday 13th. Flights from Bristol are about £118 return on easyJet if we book this month",
                "lisbon_first_dates",
            ),
            ("Priya", "I'm in! May should be fine, the move will be long done by then"),
            ("Jonas", "Count me in, I'll need to sort someone for Biscuit though"),
            ("Elif", "Yes yes yes. I've never been"),
            (
                "Dev",
                "I'd love to but May is tight for me, we have a product launch. Put me down as a maybe",
                "dev_maybe",
            ),
            ("Tomás", "Also new year thing: Maya and I signed up for the Bath Half on 16 March. No going back now"),
            (
                "Tomás",
                "My goal is under 1 hour 50. That means about 5:12 per km, which past me thought was reasonable",
                "tomas_goal",
            ),
            ("Maya", "I just want to finish without walking tbh"),
        ],
    ),
    (
        "2025-01-07",
        "20:40",
        [
            (
                "Priya",
                "Book club: I'm proposing Piranesi by Susanna Clarke for January. It's short and weird and wonderful",
                "book_jan",
            ),
            ("Elif", "I've heard so much about it, yes"),
            ("Jonas", "Is it the one with the house full of statues and the tides?"),
            ("Priya", "That's the one"),
            ("Dev", "I'll try, no promises, I'm a slow reader"),
            (
                "Priya",
                "Let's meet at mine on Thursday 30 January, 7:30. I'll do dhal, bring something to drink",
                "book_jan_meeting",
            ),
            (
                "Elif",
                "Also news: I got through to a first interview with Nordwind Logistics! Data analyst role, it's on Monday 20th",
                "elif_first_interview",
            ),
            ("Maya", "Elif that's amazing!!"),
            ("Tomás", "Go get them"),
        ],
    ),
    (
        "2025-01-12",
        "10:15",
        [
            (
                "Tomás",
                "Long run done: 14 km along the Avon towpath to Pill and back, 6:01 per km average. Legs are jelly",
            ),
            ("Maya", "I did 12 km yesterday, my right knee was complaining on the downhill bits"),
            ("Priya", "Please get that looked at before it gets worse"),
            ("Jonas", "Biscuit has been shaking his head and scratching his left ear non-stop since Friday"),
            ("Dev", "Poor boy. Ear infection? Our old dog had those all the time"),
            (
                "Jonas",
                "Vet at Horfield Vets says it's a yeast infection in the ear. Drops twice a day for ten days, Otomax, and a cone if he keeps scratching",
                "biscuit_vet",
            ),
            ("Elif", "the cone of shame!! send a photo"),
            ("Jonas", "He looks so betrayed"),
            (
                "Dev",
                "Unrelated but my broadband has dropped out four times this week. The Vodafone hub just sits there blinking red",
                "dev_wifi_problem",
            ),
            ("Tomás", "Turn it off and on again?"),
            ("Dev", "Tomás I work in IT, I have turned it off and on again"),
        ],
    ),
    (
        "2025-01-18",
        "17:30",
        [
            (
                "Maya",
                "Lisbon: I've found a flat in Alfama, on Rua dos Remédios, sleeps six, balcony with a river view",
                "lisbon_alfama",
            ),
            (
                "Maya",
                "It's €640 for the four nights for the whole flat, so roughly €107 each if all six come, €128 each if it's five",
                "lisbon_alfama_price",
            ),
            ("Priya", "That's so reasonable"),
            ("Elif", "Book it before someone else does"),
            ("Jonas", "Do we need to pay upfront?"),
            ("Maya", "30% deposit now, the rest a month before. I'll pay the deposit and you can all transfer me"),
            ("Tomás", "Transferred £40 to you just now Maya"),
            ("Dev", "Still a maybe from me, sorry. Don't count me in the split yet"),
            (
                "Jonas",
                "Different topic: Mum turns 60 on 29 March. Dad and I want to do a surprise party. Would you all come?",
                "party_idea",
            ),
            ("Priya", "Of course! Ingrid is the best"),
            ("Maya", "Absolutely, tell us what you need"),
        ],
    ),
    (
        "2025-01-21",
        "19:00",
        [
            (
                "Elif",
                "Interview debrief: it went well I think? Two people from the analytics team, lots of SQL questions",
            ),
            (
                "Elif",
                "They asked me to write a query for the average delivery delay per depot and then explain a window function. Nailed the first one, waffled on the second",
                "elif_interview_content",
            ),
            ("Dev", "Window functions trip everyone up. You'll be fine"),
            ("Elif", "They said I'd hear back within two weeks"),
            (
                "Tomás",
                "My car failed its MOT today. Front brake discs worn below the limit and a blown number plate bulb",
                "car_mot_fail",
            ),
            ("Maya", "Oh no. Is it expensive?"),
            (
                "Tomás",
                "Brennan's Motors quoted £430 for discs and pads on the front plus the bulb. Feels steep for a 2014 Skoda Fabia",
                "car_quote_brennans",
            ),
            ("Jonas", "Get a second quote, always"),
            ("Priya", "My cousin swears by Ridgeway Garage in Fishponds"),
        ],
    ),
    (
        "2025-01-25",
        "11:20",
        [
            (
                "Tomás",
                "Ridgeway Garage did it for £365 all in, and it passed the retest this morning. Thanks Priya!",
                "car_ridgeway",
            ),
            ("Priya", "Told you, my cousin is never wrong about garages"),
            (
                "Priya",
                "Flat update: I've signed for the new place! 41 Ashgrove Road in Bedminster. Two bedrooms, tiny garden",
                "priya_new_address",
            ),
            ("Elif", "Yay! When do you move?"),
            (
                "Priya",
                "Moving day is Saturday 22 February. Rent is £1,240 a month and the deposit was £1,850, which hurt",
                "priya_move_first",
            ),
            ("Jonas", "I can help carry things, I'm free that day"),
            ("Tomás", "Same, as long as I'm not doing a long run. I'll move my run to the Sunday", "move_help_tomas"),
            ("Dev", "I can lend you my drill for the shelves"),
            ("Maya", "Lisbon deposit is paid, by the way. We're officially going 🇵🇹"),
        ],
    ),
    (
        "2025-01-30",
        "22:10",
        [
            ("Priya", "Thanks for coming tonight everyone, that was the best book club in ages"),
            (
                "Jonas",
                "I'm still thinking about the bit where he counts the statues. Piranesi gets 9 out of 10 from me",
                "piranesi_jonas",
            ),
            ("Elif", "8 from me, the ending went a bit fast"),
            ("Dev", "I finished it on the bus on the way there, 9"),
            ("Maya", "7, beautiful but I wanted more about the Other"),
            ("Tomás", "I only read half, sorry. The half I read was a 10"),
            (
                "Priya",
                "February pick: The Remains of the Day by Kazuo Ishiguro. Same place, Thursday 27 Feb",
                "book_feb",
            ),
            ("Maya", "The butler one! Good choice"),
            ("Dev", "Wifi saga: switched provider. Going with Truespeed, full fibre", "dev_switch"),
            (
                "Dev",
                "900 Mbps for £32 a month, 18 month contract, installation next Wednesday. Vodafone wanted £45 for a third of that",
                "dev_truespeed",
            ),
            ("Tomás", "Nerd"),
            ("Dev", "Proud nerd"),
        ],
    ),
    (
        "2025-02-03",
        "18:45",
        [
            (
                "Elif",
                "NORDWIND WANT A SECOND INTERVIEW. It's a case study: I get a dataset on Friday and present on Wednesday 12 February",
                "elif_second_round",
            ),
            ("Maya", "Told you!!"),
            ("Dev", "If you want someone to practise the presentation on I'm happy to be the grumpy stakeholder"),
            ("Elif", "Dev yes please, Sunday?"),
            (
                "Jonas",
                "Party planning: Dad and I looked at venues. The Copper Kettle on Gloucester Road has an upstairs room",
                "party_venue_name",
            ),
            (
                "Jonas",
                "Room holds 40, free to hire if we spend £600 behind the bar, and they'll do a buffet at £14 a head",
                "party_venue",
            ),
            ("Priya", "Perfect, and it's close to your parents so she won't suspect anything"),
            ("Jonas", "The plan is Dad takes her for a 'quiet dinner' and we're all upstairs"),
            ("Maya", "I'm already emotional about this"),
        ],
    ),
    (
        "2025-02-06",
        "23:05",
        [
            ("Dev", "QUIZ NIGHT VICTORY 🏆"),
            (
                "Dev",
                "Quizteama Aguilera won the Thursday quiz at The Kings Head for the first time ever. £60 bar tab, spent in about 15 minutes",
                "quiz_win",
            ),
            ("Maya", "The music round carried us, that was all Priya"),
            ("Priya", "Years of listening to my mum's Motown records finally paid off"),
            ("Tomás", "I got the question about the capital of Mongolia and nobody believed me"),
            ("Elif", "Ulaanbaatar. I will never forget it now"),
            (
                "Jonas",
                "Next quiz is 6 March, same team name, same table by the fireplace",
                "quiz_next",
            ),
            ("Dev", "Fibre installed by the way. 930 down on the speed test. I am a new man"),
        ],
    ),
    (
        "2025-02-09",
        "09:40",
        [
            (
                "Tomás",
                "16 km this morning in 1:28. That's 5:30 per km, getting closer. Towpath was icy by Ham Green though",
                "tomas_16k",
            ),
            ("Maya", "I did 15 but my knee went at 11 km, proper sharp pain on the outside. Walked the last bit"),
            (
                "Maya",
                "Booked a physio: Karin at the Clifton Sports Clinic, Tuesday 11th at 8am. She thinks it's my IT band",
                "maya_physio",
            ),
            ("Priya", "Good. Please listen to her this time"),
            ("Maya", "I always listen. I just don't always do what she says"),
            ("Elif", "Practice presentation with Dev went ok, he was a genuinely terrible stakeholder"),
            ("Dev", "I asked why the charts weren't in Comic Sans. Fair question"),
            (
                "Elif",
                "Actually the best note he gave: lead with the one number, the 14% of deliveries that miss their window, then explain",
                "elif_presentation_tip",
            ),
        ],
    ),
    (
        "2025-02-13",
        "19:30",
        [
            (
                "Elif",
                "Second interview done. Presented for 20 minutes, then 40 minutes of questions from the head of operations, a woman called Sigrid",
                "elif_second_done",
            ),
            (
                "Elif",
                "Sigrid asked what I would do with the Rotterdam depot data. I had no idea they had a Rotterdam depot",
            ),
            ("Maya", "How did you answer?"),
            ("Elif", "I said I'd start by asking the people who work there. She smiled, so maybe ok?"),
            (
                "Maya",
                "Physio verdict: IT band syndrome. Foam rolling, clamshells, no runs over 10 km for two weeks",
                "maya_itband",
            ),
            ("Tomás", "Two weeks is fine, there's still a month to the race"),
            (
                "Priya",
                "Bad news on the move: the landlord says the old tenants can't leave until the 28th. So moving day is now Saturday 1 March",
                "priya_move_changed",
            ),
            ("Jonas", "Still free on the 1st, no problem"),
            ("Tomás", "1 March works, I'll do my long run on the Sunday again"),
        ],
    ),
    (
        "2025-02-16",
        "14:00",
        [
            (
                "Elif",
                "In other news I got an allotment!! After two years on the waiting list. Plot 27 at Horfield allotments",
                "elif_allotment",
            ),
            ("Jonas", "Finally! What are you going to grow?"),
            (
                "Elif",
                "The previous person left rhubarb and a very sad gooseberry bush. I want potatoes, beans, and dahlias for cutting",
            ),
            (
                "Elif",
                "The shed has a combination padlock, code is 4471 if any of you want to pop by and help dig",
                "allotment_code",
            ),
            ("Dev", "I'll come and dig if you pay me in rhubarb crumble"),
            (
                "Priya",
                "Van booked for the move: a Luton from Easi-Van in St Philips, £89 for the day plus fuel",
                "priya_van",
            ),
            (
                "Priya",
                "Pick-up is 8am at St Philips, keys for Ashgrove Road at 9 from the letting agent, Hollis & Reed",
                "priya_move_logistics",
            ),
            ("Tomás", "I'll be at yours at 8:30 to start loading"),
        ],
    ),
    (
        "2025-02-20",
        "21:15",
        [
            (
                "Jonas",
                "Party update. The cake: Bakehouse on Gloucester Road does a three-tier lemon and elderflower",
                "party_cake_what",
            ),
            (
                "Jonas",
                "It's £145 and they need the order by 20 March. Mum loves elderflower so it has to be that one",
                "party_cake",
            ),
            ("Elif", "I can do a slideshow of old photos if your dad can dig some out"),
            ("Jonas", "Elif you legend. He has boxes of slides from the 80s"),
            (
                "Jonas",
                "Money: Dad's paying for the room and buffet, the cake and decorations come to about £210, so £35 each from the six of us",
                "party_money",
            ),
            ("Maya", "Sending now"),
            ("Dev", "Sent"),
            ("Priya", "Also sent. What's the dress code?"),
            ("Jonas", "Mum's favourite colour is green so wear something green if you can. She'll cry, it'll be great"),
        ],
    ),
    (
        "2025-02-23",
        "15:30",
        [
            ("Dev", "Board game afternoon at mine was great. Cascadia is my new favourite"),
            (
                "Maya",
                "Priya won Wingspan with 94 points, the rest of us were in the sixties. She has a bird strategy and won't share it",
                "wingspan",
            ),
            ("Priya", "The strategy is: more eggs"),
            ("Jonas", "I'm buying my own copy so I can practise in secret"),
            (
                "Elif",
                "First afternoon at the allotment: dug out two barrows of bindweed roots. Reg says it'll come back forever",
            ),
            ("Tomás", "Physio update for Maya?"),
            ("Maya", "Down to easy 8 km runs, clamshells every night, foam roller is my enemy"),
            ("Dev", "Next games day in April, I'll get Ticket to Ride out"),
        ],
    ),
    (
        "2025-02-27",
        "22:30",
        [
            ("Priya", "Book club verdict on The Remains of the Day?"),
            ("Maya", "Devastating. 9. Stevens and Miss Kenton at the bus stop in the rain, I can't"),
            ("Tomás", "Read all of it this time. 8. Very slow but it gets you"),
            (
                "Dev",
                "6 from me, I wanted to shake Stevens the whole time. Dignity is not a personality",
                "remains_dev",
            ),
            ("Jonas", "8"),
            ("Elif", "9, the ending ruined me"),
            (
                "Priya",
                "March: I was going to say Middlemarch but everyone groaned, so it's Klara and the Sun instead, another Ishiguro. Meeting at the new flat!",
                "book_march",
            ),
            ("Jonas", "Ishiguro double bill, love it"),
            ("Priya", "Date for that one: Thursday 27 March, 7:30, at Ashgrove Road"),
        ],
    ),
    (
        "2025-03-01",
        "19:50",
        [
            ("Priya", "I'M MOVED. Thank you all so much. The sofa is in, nobody died"),
            (
                "Tomás",
                "Getting that sofa up the stairs at Ashgrove Road took us 40 minutes and we had to take the door off its hinges",
                "sofa_story",
            ),
            ("Jonas", "My back will never recover"),
            ("Dev", "Shelves are up. Slightly wonky. Call it character"),
            ("Priya", "The van went back at 6 with five minutes to spare, and the fuel came to £23 in the end"),
            ("Maya", "Pizza was deserved"),
            ("Priya", "Housewarming in a couple of weeks once I've found my plates"),
        ],
    ),
    (
        "2025-03-04",
        "12:30",
        [
            ("Elif", "GUYS"),
            (
                "Elif",
                "Nordwind offered me the job!!! £46,500, hybrid, three days in the office at Temple Quay",
                "elif_offer",
            ),
            ("Maya", "AAAAAAA"),
            ("Dev", "Congratulations! Negotiate though. Ask for more, they expect it"),
            ("Elif", "Really? I feel bad"),
            ("Dev", "Really. Say you were expecting closer to fifty. Worst case they say no"),
            ("Priya", "Dev is right. So proud of you"),
        ],
    ),
    (
        "2025-03-06",
        "17:10",
        [
            (
                "Elif",
                "Update: I asked for £50k, they came back with £49,000 and an extra five days of holiday. Accepted!",
                "elif_negotiated",
            ),
            ("Dev", "See! Told you"),
            (
                "Elif",
                "Start date is Monday 2 June. But there's a catch: they want me at an onboarding week in Rotterdam 12 to 16 May",
                "elif_rotterdam",
            ),
            ("Maya", "Oh no, that's right on top of Lisbon"),
            ("Elif", "I know. I'm so sorry. Can we move it a week?"),
            ("Jonas", "A week later is fine for me"),
            ("Tomás", "Same"),
            (
                "Maya",
                "Ok I'll try to move the flat and we rebook flights. Proposing Friday 16 to Tuesday 20 May instead",
                "lisbon_move_proposed",
            ),
            ("Jonas", "Quiz tonight, don't forget, 8pm at The Kings Head"),
        ],
    ),
    (
        "2025-03-09",
        "20:00",
        [
            ("Maya", "Lisbon saga. The Alfama host can't do the later week, they have another booking"),
            (
                "Maya",
                "They've refunded the deposit though. I found a different place in Graça instead, top floor, near the Miradouro da Senhora do Monte",
                "lisbon_graca",
            ),
            (
                "Maya",
                "It's €710 for four nights, a bit more than Alfama, but it has a proper kitchen and a roof terrace",
                "lisbon_graca_price",
            ),
            ("Priya", "Roof terrace, sold"),
            (
                "Dev",
                "Good news actually: launch moved to April, so I can come to Lisbon now if there's still room!",
                "dev_joins",
            ),
            ("Maya", "There is! Six of us then, so it's about €118 each"),
            (
                "Tomás",
                "Flights for the new dates are £134 return, I've booked mine, easyJet out 7:05 on Friday 16th",
                "lisbon_flights_new",
            ),
            ("Jonas", "Ugh 7am flight, that means leaving at 5"),
            ("Elif", "I'll book mine tonight, thank you all for moving it ❤️"),
        ],
    ),
    (
        "2025-03-12",
        "18:20",
        [
            ("Jonas", "Party change of plan. Mum needs a hip operation and it's booked for 26 March", "party_hip"),
            (
                "Jonas",
                "Surgeon says no parties for a couple of weeks, so we're moving it to Saturday 12 April, same venue, The Copper Kettle is free that night",
                "party_moved",
            ),
            ("Priya", "Of course, her health first. Hope the operation goes well"),
            ("Jonas", "Her actual birthday we'll just do cake at home, quietly"),
            (
                "Jonas",
                "The Bakehouse says I can still collect the cake on the morning of the 12th, I just had to change the order, no extra cost",
                "party_cake_moved",
            ),
            ("Maya", "Good. Let me know if you need anything while she's recovering"),
            ("Dev", "Wait, 12 April clashes with the gig?"),
            (
                "Dev",
                "I bought four Wet Leg tickets for the Bristol Beacon, £38.50 each. That's Friday 11 April, the night before",
                "gig_tickets",
            ),
            ("Dev", "Ok no clash, phew. Who wants the other three tickets?"),
            ("Elif", "Me!"),
            ("Tomás", "Me"),
            ("Priya", "Me please"),
        ],
    ),
    (
        "2025-03-16",
        "14:40",
        [
            ("Tomás", "BATH HALF DONE"),
            ("Tomás", "1:48:09!!! Under 1:50. I think I'm going to be sick but I'm so happy", "tomas_result"),
            (
                "Maya",
                "1:57:41 and I didn't walk once. The knee held until mile 11 and then I just ignored it",
                "maya_result",
            ),
            ("Priya", "You're both heroes"),
            ("Jonas", "We saw you at the Great Pulteney Street bit, Biscuit barked at everyone"),
            ("Elif", "Celebration roast at The Hare on the Hill? I booked a table for 6 at 6"),
            ("Tomás", "I'm going to eat three Yorkshire puddings"),
        ],
    ),
    (
        "2025-03-20",
        "21:00",
        [
            ("Dev", "Potluck at mine Saturday 29th? I'm doing my kimchi jjigae"),
            (
                "Dev",
                "The trick is old, sour kimchi, a spoon of gochugaru and a bit of the kimchi juice in the stock. Pork belly, tofu, spring onion",
                "dev_jjigae",
            ),
            ("Priya", "I'll make my mum's aloo gobi"),
            ("Maya", "I'll do a big salad with sumac and pomegranate so there's something green"),
            ("Elif", "Bringing rhubarb crumble from the allotment rhubarb, as promised"),
            (
                "Dev",
                "Also my sourdough starter Gerald is thriving. If anyone wants a bit of Gerald, bring a jar. Feed him 1:1 flour and water daily",
                "dev_gerald",
            ),
            ("Tomás", "I'll bring beer and my appetite"),
            ("Jonas", "Can I bring Biscuit? He's stopped scratching, the drops worked"),
            ("Dev", "Biscuit is always welcome"),
        ],
    ),
    (
        "2025-03-27",
        "22:40",
        [
            ("Priya", "Thanks for coming to the first book club at Ashgrove Road!"),
            ("Elif", "Klara and the Sun: 7. Lovely but sadder than I expected"),
            ("Maya", "8, Klara's devotion to the sun made me cry on the train"),
            ("Jonas", "7"),
            ("Dev", "9! Finally a narrator I like. Robot rights"),
            ("Tomás", "6, sorry, I preferred the butler"),
            (
                "Priya",
                "April pick: we're doing a non-fiction one for a change. Braiding Sweetgrass by Robin Wall Kimmerer, meeting 24 April at the Lido café",
                "book_april",
            ),
            ("Elif", "Perfect for an allotment person"),
            ("Jonas", "Mum's operation went well by the way. She's on crutches and furious about it"),
        ],
    ),
    (
        "2025-04-02",
        "19:15",
        [
            ("Jonas", "Lisbon question: who's looking after Biscuit while we're away?"),
            (
                "Priya",
                "My neighbour Hannah does dog sitting. £25 a day, she'll take him for two walks and he can sleep at hers",
                "biscuit_sitter",
            ),
            ("Jonas", "That's perfect. Five days, so £125. I'll message her"),
            ("Maya", "Lisbon plans: I want a day trip to Sintra on the Sunday"),
            (
                "Maya",
                "Pena Palace tickets are €20, timed entry. I'll book the 10:30 slot for all six on Sunday 18 May. Train from Rossio takes 40 minutes",
                "sintra_tickets",
            ),
            ("Tomás", "Is that the colourful castle on the hill?"),
            ("Maya", "Yes, the one that looks like a cake"),
            ("Elif", "Can we do a fado night as well?"),
            ("Priya", "Yes! Somewhere small, not the touristy ones"),
        ],
    ),
    (
        "2025-04-08",
        "20:30",
        [
            (
                "Elif",
                "Allotment report: potatoes in (Charlotte, a salad variety), broad beans up, dahlia tubers potted in the greenhouse",
            ),
            (
                "Elif",
                "Had 3 cubic metres of compost delivered from the council, £72. Dumped right by the gate, took me four hours to barrow to plot 27",
                "compost",
            ),
            ("Dev", "I did say I'd help. I did not say when"),
            ("Elif", "You owe me one afternoon of digging"),
            (
                "Maya",
                "Also the allotment neighbour, the old man with the hat, gave Elif a bag of garlic. She is now the allotment celebrity",
            ),
            ("Elif", "His name is Reg and he has been there since 1971"),
            ("Tomás", "Reg sounds like a legend"),
        ],
    ),
    (
        "2025-04-11",
        "23:45",
        [
            ("Dev", "Wet Leg were SO good"),
            ("Priya", "The encore! Chaise Longue with the whole Beacon singing"),
            ("Elif", "My ears are ringing, I'll be useless tomorrow"),
            (
                "Tomás",
                "Reminder for tomorrow: be at The Copper Kettle by 6:30, Ingrid arrives at 7. Don't park on Gloucester Road itself, she'll spot the cars",
                "party_arrival",
            ),
            ("Jonas", "And wear green!"),
        ],
    ),
    (
        "2025-04-13",
        "11:00",
        [
            ("Jonas", "Thank you all for last night. Mum cried for about ten minutes straight, Dad has it on video"),
            (
                "Jonas",
                "Her favourite part was Elif's slideshow, the photo of her on a Vespa in Gothenburg in 1987",
                "party_slideshow",
            ),
            ("Elif", "That photo is iconic. I want to be her when I'm 60"),
            ("Maya", "The lemon and elderflower cake was gone in about five minutes"),
            ("Priya", "Ingrid danced with a crutch. Legend"),
            ("Jonas", "38 people came in the end, only two couldn't make it"),
        ],
    ),
    (
        "2025-04-19",
        "16:20",
        [
            (
                "Maya",
                "Lisbon final bits. Balance for the Graça flat is due on Monday, €497 left after the deposit, I'll pay it and you send me €83 each",
            ),
            (
                "Maya",
                "Dinner booked for Saturday 17 May, 8pm, Taberna da Rua das Flores. They don't take bookings for more than 6 so we're exactly at the limit",
                "lisbon_dinner",
            ),
            ("Priya", "I've been reading about it, the menu is on a chalkboard and changes daily"),
            (
                "Dev",
                "Fado: my colleague recommends Tasca do Chico in Bairro Alto. No booking, just turn up around 9:30 and queue",
                "fado_place",
            ),
            ("Dev", "It's tiny so it's first come first served"),
            ("Tomás", "I'll bring my running shoes, apparently the hills in Lisbon are brutal"),
            ("Elif", "Tomás nobody is running on holiday"),
            ("Tomás", "I am"),
        ],
    ),
    (
        "2025-04-24",
        "22:00",
        [
            ("Priya", "Braiding Sweetgrass thoughts?"),
            (
                "Elif",
                "10. The chapter about the Three Sisters, corn beans and squash growing together, I'm trying it on the allotment this summer",
                "sweetgrass_elif",
            ),
            ("Maya", "8, slow but I loved the strawberries essay"),
            ("Dev", "7, a bit long"),
            ("Jonas", "Didn't finish, Biscuit chewed the cover"),
            ("Tomás", "8"),
            ("Priya", "We'll skip May because of Lisbon. June: Elif chooses, as a new-job present"),
            ("Elif", "Then I choose Tomorrow, and Tomorrow, and Tomorrow. Everyone says it's great"),
        ],
    ),
    (
        "2025-05-01",
        "18:10",
        [
            (
                "Tomás",
                "Bad news. The car again: clutch is slipping. Ridgeway say £780 for a new clutch, done next Tuesday",
                "car_clutch",
            ),
            ("Maya", "Ouch"),
            (
                "Tomás",
                "At this point I'm thinking of selling it and getting a bike. Bristol has more hills than roads anyway",
            ),
            ("Jonas", "Keep it until after Lisbon at least, you promised to drive me to the airport"),
            (
                "Tomás",
                "Fine. I'll drive Jonas and Priya, we leave Priya's at 5:10 on the 16th. The rest of you get the Airport Flyer",
                "airport_lift",
            ),
            ("Dev", "The Flyer from Temple Meads at 4:45 is the first one, I checked", "flyer"),
            ("Elif", "Ugh 4:45"),
        ],
    ),
    (
        "2025-05-06",
        "20:45",
        [
            ("Elif", "Last week before Rotterdam, trying to get the allotment in shape before I go"),
            (
                "Elif",
                "Reg will water my seedlings while I'm away, I said I'd give him a jar of the gooseberry jam in July",
                "reg_watering",
            ),
            ("Dev", "Reg is basically your allotment dad now"),
            ("Jonas", "Biscuit's ear is red again. Back to Horfield Vets on Thursday"),
            (
                "Jonas",
                "Vet thinks it's an allergy this time, not an infection. Trying him on a hypoallergenic food, salmon and rice, for six weeks",
                "biscuit_allergy",
            ),
            ("Priya", "Poor Biscuit. Hannah knows about the food? I'll tell her too"),
            ("Jonas", "Yes I'll drop two bags at hers with the instructions"),
        ],
    ),
    (
        "2025-05-12",
        "19:00",
        [
            ("Elif", "Greetings from Rotterdam! The office is in an old warehouse by the Maashaven, very cool"),
            (
                "Elif",
                "Met Sigrid again, she's going to be my manager. First project: the delivery windows at the Avonmouth depot",
                "elif_project",
            ),
            ("Maya", "The 14% number from your presentation!"),
            ("Elif", "Exactly that. They want it under 8% by Christmas"),
            ("Tomás", "Clutch done, £780 as quoted. Car is alive, airport run is on"),
            ("Maya", "Weather forecast for Lisbon next weekend: 26 degrees and sunny 😎"),
            (
                "Priya",
                "Packing list: sunscreen, comfy shoes for the hills, and something nice for the dinner on Saturday",
            ),
        ],
    ),
    (
        "2025-05-17",
        "23:55",
        [
            (
                "Maya",
                "Day one and two of Lisbon in one message: Tram 28 was packed, we walked instead, the view from the terrace is unreal",
            ),
            (
                "Jonas",
                "The dinner tonight at Rua das Flores. The octopus with sweet potato was the best thing I've eaten all year",
                "lisbon_dinner_review",
            ),
            ("Dev", "The bill came to €246 for six with wine, I paid, you can settle up with me later"),
            ("Priya", "Worth every cent"),
            ("Tomás", "I went for a 10 km run along the river to Belém at 7am and saw the tower. Told you I would"),
            ("Elif", "We know, you told us four times"),
        ],
    ),
    (
        "2025-05-18",
        "22:30",
        [
            ("Maya", "Sintra was magic. Pena Palace in the fog, then the Moorish Castle"),
            (
                "Priya",
                "We missed the 10:30 slot because the train was delayed, but the staff let us in at 11 anyway",
                "sintra_late",
            ),
            (
                "Dev",
                "Fado at Tasca do Chico tonight. Queued 45 minutes, completely worth it, the older singer gave me chills",
            ),
            ("Elif", "I cried. Twice. It's been an emotional few weeks"),
            ("Jonas", "Hannah sent a photo of Biscuit asleep on her sofa. He doesn't miss me at all"),
        ],
    ),
    (
        "2025-05-21",
        "13:00",
        [
            ("Maya", "Home. Already miss the pastéis de nata"),
            (
                "Maya",
                "Final money for the trip: I'm owed the last €35 each for the flat (€118 a head minus the €83 you sent) and Dev is owed €41 each for the dinner. Please send by the end of the month",
                "lisbon_settle",
            ),
            ("Tomás", "Sent both"),
            ("Priya", "Sent"),
            ("Jonas", "Same place next year?"),
            ("Elif", "Porto next year. I start at Nordwind on 2 June so I'll plan it in my lunch breaks"),
            (
                "Dev",
                "Photos are all in the shared album, called Lisboa 2025. 412 photos, 300 of them are of food",
                "photo_album",
            ),
        ],
    ),
    (
        "2025-05-25",
        "17:00",
        [
            ("Jonas", "Biscuit update: two weeks on the salmon food and the ear is clear. The vet was right"),
            ("Tomás", "Put the Fabia up for sale. £2,400 ono, new clutch, new brakes, full history", "car_sale_price"),
            ("Tomás", "Already had someone offer £2,100, which I said no to", "car_sale"),
            (
                "Priya",
                "Housewarming finally happening: Saturday 7 June at Ashgrove Road, bring plates, I still only have four",
            ),
            ("Elif", "I'll bring dahlias, the first ones are flowering"),
            ("Maya", "Next goal: Tomás and I are thinking about the Cardiff Half in October"),
            ("Tomás", "Sub 1:45 this time"),
        ],
    ),
]

# Written from the labelled messages above (each question's answer is the message(s) it names).
QUESTIONS = [
    ("When did Maya first want us to go to Lisbon, before the dates changed?", ["lisbon_first_dates"]),
    ("How much did the flights to Portugal cost in the original plan?", ["lisbon_first_dates"]),
    ("Why wasn't Dev sure he could come on the May trip at first?", ["dev_maybe"]),
    ("What finishing time was Tomás aiming for in the Bath race?", ["tomas_goal"]),
    ("What pace per kilometre did Tomás need for his target?", ["tomas_goal"]),
    ("Which novel did we read for book club in January?", ["book_jan"]),
    ("Where and when was the first book club meeting of the year, and what was Priya cooking?", ["book_jan_meeting"]),
    ("Which company did Elif first interview with, and for what kind of job?", ["elif_first_interview"]),
    ("What did the vet say was wrong with Biscuit's ear in January, and what was the treatment?", ["biscuit_vet"]),
    ("What medicine did Jonas have to put in the dog's ear and how often?", ["biscuit_vet"]),
    ("What was going wrong with Dev's internet connection?", ["dev_wifi_problem"]),
    ("How much was the first flat in Lisbon going to cost per person?", ["lisbon_alfama_price"]),
    ("What street was the original Alfama apartment on?", ["lisbon_alfama"]),
    ("When is Jonas's mum's birthday and what did he want to organise?", ["party_idea"]),
    ("What technical questions did Elif get in her first round?", ["elif_interview_content"]),
    ("Why did Tomás's car fail the MOT?", ["car_mot_fail"]),
    ("How much did the first garage want to charge to fix the brakes?", ["car_quote_brennans"]),
    ("What make and year is Tomás's car?", ["car_quote_brennans"]),
    ("Which garage in Fishponds fixed Tomás's brakes, and for how much?", ["car_ridgeway"]),
    ("What's Priya's new address?", ["priya_new_address"]),
    ("How much is the rent on Priya's new place and what was the deposit?", ["priya_move_first"]),
    ("What was the original moving day for Priya?", ["priya_move_first"]),
    ("What score did Jonas give Piranesi?", ["piranesi_jonas"]),
    ("What was the book for February's book club?", ["book_feb"]),
    ("Which broadband provider did Dev switch to, and what does it cost?", ["dev_switch", "dev_truespeed"]),
    ("How long is Dev's new internet contract?", ["dev_truespeed"]),
    ("When was Elif's case study presentation for the second round?", ["elif_second_round"]),
    ("Which venue did Jonas find for the surprise party and how many people fit?", ["party_venue_name", "party_venue"]),
    ("How much would the buffet cost per person at the party venue?", ["party_venue"]),
    ("How much was the bar tab we won at the pub quiz?", ["quiz_win"]),
    ("What is our quiz team called?", ["quiz_win"]),
    ("When is the next quiz after the one we won?", ["quiz_next"]),
    ("How long did Tomás's 16 km training run take?", ["tomas_16k"]),
    ("Who is Maya's physio and where does she work?", ["maya_physio"]),
    ("What tip did Dev give Elif for her interview presentation?", ["elif_presentation_tip"]),
    ("What share of deliveries were missing their time window in Elif's case study?", ["elif_presentation_tip"]),
    ("Who interviewed Elif in the second round?", ["elif_second_done"]),
    ("What was the diagnosis for Maya's knee, and what did the physio tell her to do?", ["maya_itband"]),
    ("Why did Priya's moving day get pushed back, and to when?", ["priya_move_changed"]),
    ("Which plot number is Elif's allotment?", ["elif_allotment"]),
    ("What's the code for the lock on the allotment shed?", ["allotment_code"]),
    ("Where did Priya hire the moving van from and how much was it?", ["priya_van"]),
    ("Which letting agent had the keys for the Bedminster flat?", ["priya_move_logistics"]),
    ("What flavour is the birthday cake, and where is it from?", ["party_cake_what"]),
    ("What's the deadline for ordering the party cake?", ["party_cake"]),
    ("How much did each of us chip in for Ingrid's party?", ["party_money"]),
    ("What did Dev think of The Remains of the Day?", ["remains_dev"]),
    ("Why didn't we end up reading Middlemarch?", ["book_march"]),
    ("How long did it take to get the sofa into Priya's flat?", ["sofa_story"]),
    ("What salary did Nordwind first offer Elif?", ["elif_offer"]),
    ("Where is the Nordwind office Elif will work from in Bristol?", ["elif_offer"]),
    ("What salary did Elif end up agreeing after she negotiated?", ["elif_negotiated"]),
    ("What did Elif get besides the higher salary?", ["elif_negotiated"]),
    ("When does Elif start her new job?", ["elif_rotterdam"]),
    ("Why did the Lisbon trip have to move?", ["elif_rotterdam"]),
    ("What were the new dates proposed for the Lisbon trip?", ["lisbon_move_proposed"]),
    ("Where is the second Lisbon apartment, the one we actually stayed in?", ["lisbon_graca"]),
    ("How much did the Graça flat cost for the four nights?", ["lisbon_graca_price"]),
    ("Why could Dev come to Portugal in the end?", ["dev_joins"]),
    ("What time was the outbound flight on the new dates, and what did the ticket cost?", ["lisbon_flights_new"]),
    ("Why was Ingrid's party moved, and to which date?", ["party_hip", "party_moved"]),
    ("Did changing the party date cost anything extra with the bakery?", ["party_cake_moved"]),
    ("How much were the Wet Leg tickets and which night is the gig?", ["gig_tickets"]),
    ("What was Tomás's official time in the half marathon?", ["tomas_result"]),
    ("How did Maya do in the Bath Half, and did her knee hold up?", ["maya_result"]),
    ("What's Dev's secret to a good kimchi stew?", ["dev_jjigae"]),
    ("What's the name of Dev's sourdough starter and how do you feed it?", ["dev_gerald"]),
    ("Which book did we pick for April, and where is that meeting?", ["book_april"]),
    ("Who is looking after the dog during the Lisbon trip, and what does she charge?", ["biscuit_sitter"]),
    ("What time slot did Maya book at Pena Palace, and how much were the tickets?", ["sintra_tickets"]),
    ("How long is the train ride to Sintra and where does it leave from?", ["sintra_tickets"]),
    ("How much compost did Elif have delivered and what did it cost?", ["compost"]),
    ("What time did we have to be at the party venue, and where shouldn't we park?", ["party_arrival"]),
    ("Which photo did Ingrid love most in the slideshow?", ["party_slideshow"]),
    ("Where and when is the big dinner in Lisbon booked?", ["lisbon_dinner"]),
    ("Where did Dev's colleague say we should go to hear fado?", ["fado_place"]),
    ("What did Elif give Braiding Sweetgrass and which part did she want to try?", ["sweetgrass_elif"]),
    ("What's wrong with Tomás's car in May, and how much is the repair?", ["car_clutch"]),
    ("Who is driving to the airport for the Lisbon flight and when do they leave?", ["airport_lift"]),
    ("Who's watering Elif's seedlings while she's in the Netherlands?", ["reg_watering"]),
    ("What did the vet think caused Biscuit's ear trouble in May, and what's the new diet?", ["biscuit_allergy"]),
    ("What will Elif's first project at Nordwind be about?", ["elif_project"]),
    ("What was the best dish at the Lisbon dinner?", ["lisbon_dinner_review"]),
    ("Did we make our Pena Palace slot on time?", ["sintra_late"]),
    ("How much does each of us owe Maya and Dev after Lisbon?", ["lisbon_settle"]),
    ("What's the shared photo album from the trip called?", ["photo_album"]),
    ("How much is Tomás asking for his Skoda, and what offer did he turn down?", ["car_sale_price", "car_sale"]),
    ("Who said they would shift their long run so they could help Priya move house?", ["move_help_tomas"]),
    (
        "How much did it cost to fix the brakes in the end compared to the first quote?",
        ["car_ridgeway", "car_quote_brennans"],
    ),
    ("What did Tomás's car cost to repair over the year?", ["car_ridgeway", "car_clutch"]),
    ("Which books did Priya choose for the first three months?", ["book_jan", "book_feb", "book_march"]),
    (
        "How did Elif's salary talk with Nordwind go, from the first number to the final one?",
        ["elif_offer", "elif_negotiated"],
    ),
    ("How did the plan for Priya's moving day change?", ["priya_move_first", "priya_move_changed"]),
    ("How did the Lisbon dates change over time?", ["lisbon_first_dates", "lisbon_move_proposed"]),
    (
        "How did the price of the Lisbon apartment change when we switched?",
        ["lisbon_alfama_price", "lisbon_graca_price"],
    ),
    ("What happened to the date of the surprise 60th?", ["party_idea", "party_moved"]),
    ("What were the two problems Biscuit had with his ears this year?", ["biscuit_vet", "biscuit_allergy"]),
    ("Compare Tomás's and Maya's half marathon times", ["tomas_result", "maya_result"]),
    ("What happened at Elif's second interview with the head of operations?", ["elif_second_done"]),
    ("What number did Tomás give about his long run pace in February?", ["tomas_16k"]),
    ("Which gig did Dev buy tickets for?", ["gig_tickets"]),
    ("How did the Rotterdam onboarding week clash with our plans?", ["elif_rotterdam", "lisbon_move_proposed"]),
    ("Who will be Elif's manager at the new job?", ["elif_project"]),
    ("What did we get for winning the quiz at the Kings Head?", ["quiz_win"]),
    ("How much was Vodafone charging compared to Dev's new fibre deal?", ["dev_truespeed"]),
    ("How long will Biscuit be on the special food?", ["biscuit_allergy"]),
    ("What time is the first Airport Flyer from Temple Meads?", ["flyer"]),
    ("Who won the bird board game at Dev's, and with what score?", ["wingspan"]),
]


def build(out: Path = HERE) -> dict:
    """Write vault/ and questions.json under ``out``; returns {"messages": n, "questions": n}."""
    rng = random.Random(SEED)
    chatter = CHATTER[:]
    rng.shuffle(chatter)
    vault = out / "vault"
    if vault.exists():
        shutil.rmtree(vault)
    labels: dict[str, str] = {}
    count = 0
    # Spread the small talk over the sessions: each session gets its share, placed at seeded positions.
    per_session = [len(chatter) // len(SESSIONS)] * len(SESSIONS)
    for i in range(len(chatter) - sum(per_session)):
        per_session[i] += 1
    for (day, start, messages), n_chat in zip(SESSIONS, per_session, strict=True):
        lines = [m if len(m) == 3 else (m[0], m[1], None) for m in messages]
        for _ in range(n_chat):
            text = chatter.pop()
            pos = rng.randint(1, len(lines))
            speaker = rng.choice(PEOPLE)
            lines.insert(pos, (speaker, text, None))
        when = datetime.combine(date.fromisoformat(day), datetime.strptime(start, "%H:%M").time())
        folder = vault / day
        folder.mkdir(parents=True)
        for n, (speaker, text, label) in enumerate(lines, start=1):
            when += timedelta(minutes=rng.choice([0, 1, 1, 2, 3, 5, 8]))
            key = f"{day}/{n:02d} {speaker}"
            stamp = f"{when:%A} {when.day} {when:%B %Y}, {when:%H:%M}"
            body = (
                f"---\ntype: message\nspeaker: {speaker}\ndate: '{day}'\ntime: '{when:%H:%M}'\n"
                f"tags:\n- message\n---\n# {speaker}, {stamp}\n\n{text}\n"
            )
            (folder / f"{n:02d} {speaker}.md").write_text(body, encoding="utf-8")
            count += 1
            if label:
                if label in labels:
                    raise SystemExit(f"label {label} used twice")
                labels[label] = key
    questions = []
    for q, wanted in QUESTIONS:
        missing = [w for w in wanted if w not in labels]
        if missing:
            raise SystemExit(f"question {q!r}: unknown labels {missing}")
        questions.append({"q": q, "useful": [labels[w] for w in wanted]})
    data = {
        "vault": "demo/conversation/vault",
        "about": (
            "A group chat of six friends in Bristol, January to May 2025, one note per message "
            "(demo/conversation/generate.py). Each question names the message(s) that answer it (note keys: "
            "vault path without .md). Written from the messages before any retrieval was run on this set; "
            "never edited after (MANIFEST.sha256)."
        ),
        "questions": questions,
    }
    (out / "questions.json").write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return {"messages": count, "questions": len(questions)}


if __name__ == "__main__":
    print(build())
