from metrics_kit.tools.cli import main

raise SystemExit(main())
