# Prints made-up secrets, for --redact to mask:
#   bin/microbox exec --json --redact examples/leaky.py
print("config loaded for ops@example.com from /home/alice/app/settings.py")
print("OPENAI_API_KEY=sk-abcdefghijklmnopqrstuvwxyz123456")
print("db: postgres://app:hunter2@10.1.2.3:5432/orders")
print("ticket=T-123456 opened")
