# Reads data.csv from its working directory and prints each city's total:
#   bin/microbox exec --file examples/data.csv examples/main.py
import csv
from collections import Counter

totals = Counter()
with open("data.csv", newline="") as f:
    for row in csv.DictReader(f):
        totals[row["city"]] += int(row["sales"])
for city, total in sorted(totals.items()):
    print(city, total)
