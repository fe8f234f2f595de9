from hexbuild.cli.entry import run

run()
