"""Exits 0 but prints something that is not the JSON contract."""

print("all good!!! <html>")
