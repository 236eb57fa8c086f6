"""`python -m mqtool` runs the same CLI as the `mqtool` console script."""

from mqtool.cli.main import main

if __name__ == "__main__":
    main()
