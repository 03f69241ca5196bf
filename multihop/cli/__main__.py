from multihop.cli import app

app()
