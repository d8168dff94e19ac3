from pymc_resume.cli import main

main()
