def main() -> None:
    raise SystemExit("dsh-snapshot: not built yet")
