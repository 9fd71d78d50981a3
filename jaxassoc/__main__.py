from jaxassoc.app.main import main

main()
