"""Vocabulary of the generated WebShop catalogue: product types, attributes, options, phrasing.

Five top categories as in WebShop (beauty, electronics, fashion, food, furniture/home), 30 product
types. Each type lists its WebShop-style search ``query``, its category path, the noun phrase used
in instructions, an attribute pool (what goals ask for), option groups (what the item page offers)
and a price range. The vocabulary is chosen so that, under the reward's own fuzzy matcher, no two
attributes of a type match each other and no two values of an option group do (a test checks it),
so that a wrong attribute or option really is wrong.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ProductType:
    """One kind of product (e.g. shampoo) with everything needed to generate instances of it."""

    key: str
    category: str  # top-level category, the goal's task_type
    path: str  # category path, levels joined by " › "
    query: str  # WebShop's per-product search query
    name: str  # noun phrase in instructions and titles ("shampoo", "wireless earbuds")
    plural: bool  # "i need wireless earbuds" rather than "i need a wireless earbuds"
    attributes: tuple[str, ...]
    options: dict[str, tuple[str, ...]] = field(default_factory=dict)
    price: tuple[float, float] = (10.0, 50.0)
    title_suffixes: tuple[str, ...] = ()


def _t(key, category, path, query, name, attributes, options, price, suffixes, plural=False):
    return ProductType(key, category, path, query, name, plural, tuple(attributes), dict(options),
                       price, tuple(suffixes))


_HAIR = "beauty & personal care › hair care › shampoo & conditioner"
_SKIN = "beauty & personal care › skin care › face"
_MAKEUP = "beauty & personal care › makeup"
_ORAL = "beauty & personal care › oral care"
_ELEC = "electronics › accessories & supplies"
_AUDIO = "electronics › headphones & speakers"
_MEN = "clothing, shoes & jewelry › men"
_WOMEN = "clothing, shoes & jewelry › women"
_FOOD = "grocery & gourmet food"
_HOME = "home & kitchen"

SIZES = ("small", "medium", "large", "xl")
PRODUCT_TYPES: tuple[ProductType, ...] = (
    # ---------------------------------------------------------------- beauty
    _t("shampoo", "beauty", f"{_HAIR} › shampoos", "shampoo", "shampoo",
       ["sulfate free", "paraben free", "argan oil", "tea tree", "dry hair", "color treated hair",
        "cruelty free", "natural ingredients"],
       {"size": ("8 fl oz", "16 fl oz", "32 fl oz"), "scent": ("lavender", "coconut", "unscented", "citrus")},
       (8.0, 38.0), ["for Women and Men", "Daily Moisturizing Formula", "Salon Formula"]),
    _t("conditioner", "beauty", f"{_HAIR} › conditioners", "conditioner", "hair conditioner",
       ["sulfate free", "coconut oil", "frizz control", "curly hair", "vegan", "silicone free"],
       {"size": ("8 fl oz", "16 fl oz", "32 fl oz"), "scent": ("rose", "vanilla", "unscented")},
       (7.0, 34.0), ["for All Hair Types", "Repair Treatment", "Leave-In Formula"]),
    _t("moisturizer", "beauty", f"{_SKIN} › moisturizers", "face moisturizer", "face moisturizer",
       ["hyaluronic acid", "fragrance free", "sensitive skin", "anti aging", "spf 30", "oil free",
        "vitamin c", "dermatologist tested"],
       {"size": ("1.7 oz", "3.4 oz")},
       (11.0, 58.0), ["Day Cream", "Hydrating Gel Cream", "Night Cream"]),
    _t("lipstick", "beauty", f"{_MAKEUP} › lips › lipstick", "lipstick", "lipstick",
       ["long lasting", "matte finish", "cruelty free", "vegan", "moisturizing", "waterproof"],
       {"color": ("red", "nude", "pink", "coral", "burgundy", "purple")},
       (5.0, 29.0), ["Lip Color", "Liquid Lipstick Set", "Lip Stain"]),
    _t("nail_polish", "beauty", f"{_MAKEUP} › nails › nail polish", "nail polish", "nail polish",
       ["quick dry", "non toxic", "long lasting", "gel effect", "chip resistant"],
       {"color": ("red", "pink", "teal", "black", "lavender", "gold"), "size": ("0.5 fl oz", "set of six")},
       (4.0, 24.0), ["Nail Lacquer", "Manicure Kit", "Polish Bottle"]),
    _t("toothbrush", "beauty", f"{_ORAL} › toothbrushes › electric toothbrushes", "electric toothbrush",
       "electric toothbrush",
       ["rechargeable", "sensitive teeth", "two minute timer", "travel case", "soft bristles"],
       {"color": ("white", "black", "pink", "blue"), "pack": ("1 handle", "2 handles")},
       (18.0, 79.0), ["Sonic Toothbrush", "Oral Care Kit", "Brush Heads Included"]),
    # ---------------------------------------------------------------- electronics
    _t("earbuds", "electronics", f"{_AUDIO} › earbud headphones", "wireless earbuds", "wireless earbuds",
       ["noise cancelling", "bluetooth 5.3", "water resistant", "long battery life", "fast charging",
        "touch control", "hands free calling"],
       {"color": ("black", "white", "navy", "pink")},
       (19.0, 89.0), ["Headphones with Charging Case", "Sport Earphones", "Stereo Headset"], plural=True),
    _t("phone_case", "electronics", f"{_ELEC} › cell phone cases", "phone case", "phone case",
       ["shockproof", "wireless charging compatible", "slim fit", "kickstand", "screen protector included",
        "military grade protection"],
       {"color": ("black", "clear", "purple", "green", "red"),
        "size": ("iphone 15", "pixel 8", "galaxy s24")},
       (7.0, 32.0), ["Protective Cover", "Bumper Case", "Cover for Phone"]),
    _t("hdmi_cable", "electronics", f"{_ELEC} › cables › hdmi cables", "hdmi cable", "hdmi cable",
       ["4k", "high speed", "gold plated", "braided", "ethernet"],
       {"size": ("3 ft", "6 ft", "10 ft", "25 ft"), "pack": ("single", "2 pack")},
       (6.0, 29.0), ["Cord for TV and Monitor", "Video Cable", "Cable with Connectors"]),
    _t("charger", "electronics", f"{_ELEC} › chargers & power adapters", "usb c charger", "usb c charger",
       ["fast charging", "foldable plug", "dual port", "gan technology", "travel friendly"],
       {"color": ("white", "black"), "power": ("20w", "45w", "67w")},
       (11.0, 49.0), ["Wall Charger Block", "Power Adapter", "Charging Brick"]),
    _t("speaker", "electronics", f"{_AUDIO} › portable speakers", "bluetooth speaker", "bluetooth speaker",
       ["waterproof", "portable", "stereo sound", "long battery life", "built-in microphone", "deep bass"],
       {"color": ("black", "blue", "red", "grey", "green")},
       (22.0, 119.0), ["Outdoor Speaker", "Party Speaker", "Mini Speaker"]),
    _t("watch_band", "electronics", f"{_ELEC} › wearable technology › bands", "smart watch band",
       "smart watch band",
       ["quick release", "stainless steel", "silicone", "adjustable", "sweat resistant"],
       {"color": ("black", "silver", "navy", "pink", "olive"), "size": ("38mm", "42mm", "45mm")},
       (6.0, 27.0), ["Replacement Strap", "Sport Band", "Wristband"]),
    # ---------------------------------------------------------------- fashion
    _t("running_shoes", "fashion", f"{_MEN} › shoes › athletic › running", "men's running shoes",
       "running shoes",
       ["non slip", "breathable mesh", "lightweight", "memory foam", "rubber sole", "arch support"],
       {"size": ("7", "8", "9", "10", "11", "12"), "color": ("black", "white", "grey", "navy", "red")},
       (29.0, 99.0), ["Athletic Sneakers for Men", "Walking Shoes", "Trail Runners"], plural=True),
    _t("tunic", "fashion", f"{_WOMEN} › clothing › tops, tees & blouses", "women's tunic top", "tunic top",
       ["short sleeve", "loose fit", "machine wash", "v neck", "polyester spandex"],
       {"size": SIZES, "color": ("black", "white", "coral", "navy", "green", "beige")},
       (12.0, 36.0), ["Blouse for Women", "Casual Shirt", "Summer Top"]),
    _t("jeans", "fashion", f"{_MEN} › clothing › jeans", "men's jeans", "jeans",
       ["slim fit", "stretch denim", "machine wash", "button closure", "classic five pocket"],
       {"size": ("30w x 30l", "32w x 32l", "34w x 34l", "38w x 36l"),
        "color": ("dark wash", "light wash", "black", "grey")},
       (19.0, 69.0), ["Denim Pants for Men", "Straight Leg Jean", "Trousers"], plural=True),
    _t("yoga_pants", "fashion", f"{_WOMEN} › clothing › active › leggings", "women's yoga pants",
       "yoga pants",
       ["high waist", "tummy control", "moisture wicking", "side pockets", "squat proof"],
       {"size": SIZES, "color": ("black", "navy", "charcoal", "purple", "olive")},
       (14.0, 45.0), ["Workout Leggings", "Athletic Pants", "Gym Tights"], plural=True),
    _t("jacket", "fashion", f"{_MEN} › clothing › jackets & coats", "men's winter jacket", "winter jacket",
       ["water resistant", "hooded", "fleece lined", "zipper closure", "windproof"],
       {"size": SIZES, "color": ("black", "navy", "khaki", "olive", "grey")},
       (35.0, 129.0), ["Puffer Coat", "Outdoor Parka", "Warm Coat for Men"]),
    _t("sandals", "fashion", f"{_WOMEN} › shoes › sandals", "women's sandals", "sandals",
       ["open toe", "ankle strap", "arch support", "non slip", "faux leather"],
       {"size": ("6", "7", "8", "9", "10"), "color": ("black", "tan", "white", "gold", "brown")},
       (16.0, 59.0), ["Flat Sandals for Women", "Summer Slides", "Beach Shoes"], plural=True),
    # ---------------------------------------------------------------- food
    _t("green_tea", "food", f"{_FOOD} › beverages › tea › green tea", "green tea", "green tea",
       ["organic", "gluten free", "non gmo", "individually wrapped", "decaffeinated"],
       {"flavor": ("jasmine", "mint", "original", "lemon ginger"),
        "size": ("20 count", "48 count", "100 count")},
       (4.0, 29.0), ["Tea Bags", "Loose Leaf Tea", "Herbal Infusion"]),
    _t("protein_bar", "food", f"{_FOOD} › snack foods › bars › protein bars", "protein bars", "protein bars",
       ["gluten free", "low sugar", "high protein", "keto friendly", "plant based"],
       {"flavor": ("chocolate chip", "peanut butter", "cookie dough", "salted caramel"),
        "size": ("12 bars", "30 bars")},
       (13.0, 44.0), ["Snack Bars", "Energy Bars", "Meal Replacement Bars"], plural=True),
    _t("coffee", "food", f"{_FOOD} › beverages › coffee › whole bean", "whole bean coffee", "whole bean coffee",
       ["medium roast", "fair trade", "organic", "single origin", "low acid"],
       {"size": ("12 ounce", "2 pound", "80 ounce"), "flavor": ("original", "hazelnut", "mocha")},
       (9.0, 49.0), ["Coffee Beans", "Arabica Coffee", "Coffee Bag"]),
    _t("mixed_nuts", "food", f"{_FOOD} › snack foods › nuts & seeds", "mixed nuts", "mixed nuts",
       ["unsalted", "dry roasted", "resealable bag", "kosher", "non gmo"],
       {"size": ("1 lb", "40 ounce", "3 pounds")},
       (8.0, 35.0), ["Nut Mix", "Snack Nuts", "Nuts Variety Pack"], plural=True),
    _t("chocolate", "food", f"{_FOOD} › candy & chocolate › chocolate bars", "dark chocolate", "dark chocolate",
       ["sugar free", "vegan", "dairy free", "individually wrapped", "fair trade"],
       {"flavor": ("sea salt", "almond", "orange", "mint"), "size": ("3 bars", "10 bars")},
       (6.0, 32.0), ["Chocolate Bars", "Cocoa Squares", "Chocolate Gift Box"]),
    _t("olive_oil", "food", f"{_FOOD} › pantry staples › cooking oils", "olive oil", "olive oil",
       ["extra virgin", "cold pressed", "organic", "glass bottle", "non gmo"],
       {"size": ("16.9 fl oz", "1 liter", "1 gallon")},
       (9.0, 55.0), ["Cooking Oil", "Imported Olive Oil", "Oil for Salad"]),
    # ---------------------------------------------------------------- furniture & home
    _t("office_chair", "furniture", f"{_HOME} › furniture › home office furniture › chairs", "office chair",
       "office chair",
       ["ergonomic design", "lumbar support", "adjustable height", "mesh back", "easy assembly",
        "padded armrests"],
       {"color": ("black", "grey", "white", "blue")},
       (59.0, 249.0), ["Desk Chair", "Computer Chair", "Task Chair with Wheels"]),
    _t("bookshelf", "furniture", f"{_HOME} › furniture › living room furniture › bookcases", "bookshelf",
       "bookshelf",
       ["easy assembly", "solid wood", "five tier", "industrial style", "anti tip kit"],
       {"color": ("white", "black", "espresso", "rustic brown")},
       (39.0, 189.0), ["Bookcase", "Storage Shelf", "Display Rack"]),
    _t("coffee_table", "furniture", f"{_HOME} › furniture › living room furniture › tables", "coffee table",
       "coffee table",
       ["living room", "mid century modern", "storage shelf", "solid wood", "easy assembly"],
       {"color": ("walnut", "white", "black", "oak")},
       (49.0, 219.0), ["Center Table", "Cocktail Table", "Sofa Table"]),
    _t("sheet_set", "furniture", f"{_HOME} › bedding › sheets & pillowcases", "bed sheet set", "bed sheet set",
       ["deep pocket", "machine washable", "wrinkle free", "cooling", "egyptian cotton"],
       {"size": ("twin", "full", "queen", "king"), "color": ("white", "grey", "navy", "sage", "ivory")},
       (19.0, 89.0), ["Bedding Sheets", "Sheets and Pillowcases", "Hotel Collection Sheets"]),
    _t("pillow_covers", "furniture", f"{_HOME} › home decor › throw pillow covers", "throw pillow covers",
       "throw pillow covers",
       ["machine washable", "hidden zipper", "soft velvet", "farmhouse style", "double sided"],
       {"size": ("18 x 18 inch", "20 x 20 inch"), "color": ("beige", "green", "yellow", "grey", "pink")},
       (8.0, 29.0), ["Cushion Covers", "Pillowcases for Sofa", "Decorative Pillow Shams"], plural=True),
    _t("table_lamp", "furniture", f"{_HOME} › lighting & ceiling fans › lamps", "table lamp", "table lamp",
       ["touch control", "usb port", "dimmable", "bedside", "linen shade"],
       {"color": ("black", "white", "brass", "grey")},
       (17.0, 79.0), ["Nightstand Lamp", "Desk Lamp", "Reading Light"]),
)

BRAND_HEADS = ("lu", "ve", "ka", "mi", "so", "ri", "ta", "no", "be", "za", "do", "pe", "fi", "ar", "el", "cor")
BRAND_TAILS = ("mora", "lyn", "tex", "via", "rix", "nova", "dale", "tron", "bel", "sen", "qua", "vin", "ley")

BULLET_TAILS = (
    "designed for everyday use",
    "made to the highest quality standards",
    "a favourite of thousands of customers",
    "backed by our satisfaction guarantee",
    "tested by our product team",
    "great value for the price",
)
DESCRIPTION_TEMPLATES = (
    "The {brand} {name} is made for people who care about the details. {extra}",
    "Meet the {name} from {brand}. {extra}",
    "{brand} brings you a {name} you can rely on. {extra}",
)
DESCRIPTION_EXTRAS = (
    "It ships in recyclable packaging.",
    "Customer service is available seven days a week.",
    "Each unit is inspected before shipping.",
    "It makes a thoughtful gift.",
)
REVIEW_LINES = (
    "works as described",
    "good quality for the money",
    "arrived quickly and well packed",
    "not bad but the listing photos look better",
    "would buy again",
    "my second purchase from this brand",
)

# Instruction templates: the train split uses TRAIN_TEMPLATES, the eval split the held-out ones.
# Slots: {a} article ("a "/"an "/""), {attrs} attribute phrase, {name} type phrase, {opts}, {price}.
TRAIN_TEMPLATES = (
    "i need {a}{attrs} {name}{opts}{price}",
    "i am looking for {a}{name} that is {attrs}{opts}{price}",
    "i want to buy {a}{name} which is {attrs}{opts}{price}",
    "find me {a}{attrs} {name}{opts}{price}",
)
EVAL_TEMPLATES = (
    "i'm searching for {a}{name}, it should be {attrs}{opts}{price}",
    "could you get me {a}{attrs} {name}{opts}{price}",
    "please help me find {a}{name} that is {attrs}{opts}{price}",
)

__all__ = ["EVAL_TEMPLATES", "PRODUCT_TYPES", "TRAIN_TEMPLATES", "ProductType"]
