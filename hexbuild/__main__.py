from hexbuild.cli.main import run

run()
